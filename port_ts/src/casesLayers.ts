// Forward cases of the layers family (twin: cases_layers.py). Filled in by its owner.

import type { Builder } from "./casesAttention.ts";

export const BUILDERS: Record<string, Builder> = {};
