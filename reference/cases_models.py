"""Forward cases of the models family (twin: casesModels.ts). Filled in by its owner."""

BUILDERS = {}
