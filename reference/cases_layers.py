"""Forward cases of the layers family (twin: casesLayers.ts). Filled in by its owner."""

BUILDERS = {}
