// Golden documents: how the port writes one case's tensors as JSON (twin: reference/core/golden.py).
// A training case's document also holds "digests": name -> SHA-256 hex (docs/training.md).
// Layout (docs/goldens.md): keys sorted, two-space indent, a list of scalars on one line, a
// trailing newline. float64 in the shortest round-trip form (String(x)); -0 as -0.0; NaN and
// +-Infinity as the strings "NaN", "Infinity", "-Infinity". Same input, same bytes.

import { GENERATOR } from "./rng.ts";
import type { Tensor, IntTensor } from "./ops.ts";

export const SCHEMA_VERSION = 1;
export const ENGINE = { name: "port", version: "0.1.0" };

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Named = Record<string, Tensor | IntTensor>;

export function tensorDoc(t: Tensor | IntTensor): { [key: string]: Json } {
  const dtype = t.data instanceof Int32Array ? "int64" : "float64";
  return { dtype, shape: [...t.shape], data: Array.from(t.data) };
}

/** The golden document; `digests` (name -> SHA-256 hex, training cases) only when given. */
export function caseDocument(caseSpec: Json, inputs: Named, outputs: Named, digests?: Record<string, string>): { [key: string]: Json } {
  const docs = (named: Named) => Object.fromEntries(Object.entries(named).map(([k, v]) => [k, tensorDoc(v)]));
  const doc: { [key: string]: Json } = {
    schema_version: SCHEMA_VERSION,
    engine: { ...ENGINE },
    generator: GENERATOR,
    case: caseSpec,
    inputs: docs(inputs),
    outputs: docs(outputs),
  };
  if (digests !== undefined) doc.digests = { ...digests };
  return doc;
}

function scalar(v: Json): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") {
    if (Number.isNaN(v)) return '"NaN"';
    if (v === Infinity) return '"Infinity"';
    if (v === -Infinity) return '"-Infinity"';
    if (Object.is(v, -0)) return "-0.0";
    return String(v);
  }
  if (typeof v === "string") return JSON.stringify(v);
  throw new TypeError("cannot write a nested value as a scalar");
}

function compound(v: Json): boolean {
  return v !== null && typeof v === "object";
}

/** The golden text of value. */
export function dumps(value: Json, indent = 0): string {
  const pad = "  ".repeat(indent + 1);
  const close = "  ".repeat(indent);
  if (Array.isArray(value)) {
    if (!value.some(compound)) return "[" + value.map(scalar).join(", ") + "]";
    return "[\n" + value.map((v) => pad + dumps(v, indent + 1)).join(",\n") + "\n" + close + "]";
  }
  if (compound(value)) {
    const obj = value as { [key: string]: Json };
    const keys = Object.keys(obj).sort();
    if (keys.length === 0) return "{}";
    const items = keys.map((k) => `${pad}${JSON.stringify(k)}: ${dumps(obj[k], indent + 1)}`);
    return "{\n" + items.join(",\n") + "\n" + close + "}";
  }
  return scalar(value);
}
