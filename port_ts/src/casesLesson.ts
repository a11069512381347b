// Forward cases of the lesson family (twin: cases_lesson.py). Filled in by its owner.

import type { Builder } from "./casesAttention.ts";

export const BUILDERS: Record<string, Builder> = {};
