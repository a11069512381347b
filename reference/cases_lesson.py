"""Forward cases of the lesson family (twin: casesLesson.ts). Filled in by its owner."""

BUILDERS = {}
