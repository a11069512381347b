// Forward cases of the models family (twin: cases_models.py). Filled in by its owner.

import type { Builder } from "./casesAttention.ts";

export const BUILDERS: Record<string, Builder> = {};
