// Reading a case's configuration, with errors that say what is wrong (twin: case_config.py).

import { type Tensor, type IntTensor } from "./ops.ts";
import type { Generator } from "./rng.ts";
import type { Named } from "./golden.ts";
import type { Params } from "./params.ts";

export type Builder = (config: Config, rng: Generator) => { inputs: Named; outputs: Named };
/** An op's outputs from its case's inputs and config; rng, at the position the inputs were handed
 *  with, for the forward's dropout masks and gradcheck's draws; params, a gradient check's
 *  parameters (docs/protocol.md, "Handed inputs"). */
export type Compute = (inputs: Named, config: Config, rng: Generator, params: Params | null) => Named;

export type Config = { [key: string]: unknown };

/** A case's configuration is malformed; the message says what was expected and found. */
export class CaseError extends Error {}

/** What a case's status line says of an error: a CaseError's own message; anything else by its
 *  name and message, with the first lines of its stack as the trace. */
export function errorFields(err: unknown): { error: string; trace?: string } {
  const e = err as Error;
  if (err instanceof CaseError) return { error: e.message };
  return { error: `${e.name}: ${e.message}`, trace: String(e.stack ?? "").split("\n").slice(0, 5).join("\n") };
}

/** A config value as both engines write it in a message: compact JSON, the non-finite numbers as
 *  Infinity, -Infinity, NaN (twin: case_config.py shown). */
export function shown(value: unknown): string {
  const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? `\u0000${v}\u0000` : v));
  return text === undefined ? "null" : text.replace(/"\\u0000(-?Infinity|NaN)\\u0000"/g, "$1");
}

/** Every number anywhere in a config is finite (JSON's 1e400 reads as Infinity in both engines);
 *  the same rule and message as case_config.py check_numbers. */
export function checkNumbers(config: unknown): void {
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    throw new CaseError(`config must be an object, got ${shown(config)}`);
  }
  for (const [key, value] of Object.entries(config)) {
    const stack: [unknown, string][] = [[value, key]];
    while (stack.length > 0) {
      const [item, where] = stack.pop()!;
      if (typeof item === "number" && !Number.isFinite(item)) {
        if (where === key) throw new CaseError(`config '${key}' must be a finite number, got ${shown(item)}`);
        throw new CaseError(`config '${key}' must hold finite numbers, got ${shown(item)} at ${where}`);
      }
      if (Array.isArray(item)) {
        for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], `${where}[${i}]`]);
      } else if (typeof item === "object" && item !== null) {
        const entries = Object.entries(item);
        for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i][1], `${where}.${entries[i][0]}`]);
      }
    }
  }
}

/** config[key], or `fallback` when given; a missing required key is a CaseError. With a number as
 *  the fallback, a value given must be a finite number too ("NaN" or true is not one). */
export function get<T = unknown>(config: Config, key: string, fallback?: T): T {
  if (key in config) {
    const value = config[key];
    if (typeof fallback === "number" && !(typeof value === "number" && Number.isFinite(value))) {
      throw new CaseError(`config '${key}' must be a finite number, got ${shown(value)}`);
    }
    return value as T;
  }
  if (fallback === undefined) {
    throw new CaseError(`config needs '${key}'; found keys [${Object.keys(config).sort().join(", ")}]`);
  }
  return fallback;
}

/** config[key] as a positive integer (a count, a size, a number of steps); `fallback` when the
 * key is missing, if given. */
export function positiveInt(config: Config, key: string, fallback?: number): number {
  const value = get<unknown>(config, key, fallback);
  if (!(typeof value === "number" && Number.isInteger(value) && value >= 1)) {
    throw new CaseError(`config '${key}' must be a positive integer, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** config[key] as a positive number (a learning rate, a clipping threshold). */
export function positiveNumber(config: Config, key: string): number {
  const value = get<unknown>(config, key);
  if (!(typeof value === "number" && value > 0)) {
    throw new CaseError(`config '${key}' must be a positive number, got ${JSON.stringify(value)}`);
  }
  return value;
}

export function shape(config: Config, key: string, rank?: number): number[] {
  const value = get<unknown>(config, key);
  if (!Array.isArray(value) || !value.every((s) => Number.isInteger(s) && s >= 0)) {
    throw new CaseError(`config '${key}' must be a list of non-negative integers, got ${JSON.stringify(value)}`);
  }
  if (rank !== undefined && value.length !== rank) {
    throw new CaseError(`config '${key}' must have ${rank} entries, got ${JSON.stringify(value)}`);
  }
  return value as number[];
}

function flatten(value: unknown, name: string): { shape: number[]; values: number[] } {
  if (!Array.isArray(value)) {
    if (typeof value !== "number") throw new CaseError(`config '${name}' must hold numbers, got ${JSON.stringify(value)}`);
    return { shape: [], values: [value] };
  }
  if (value.length === 0) return { shape: [0], values: [] };
  const parts = value.map((v) => flatten(v, name));
  const inner = parts[0].shape;
  if (!parts.every((p) => p.shape.join() === inner.join())) {
    throw new CaseError(`config '${name}' is ragged: ${JSON.stringify(value)}`);
  }
  return { shape: [value.length, ...inner], values: parts.flatMap((p) => p.values) };
}

/** An explicit integer list (1-D or nested) from the config. */
export function intArray(value: unknown, name: string): IntTensor {
  const { shape, values } = flatten(value, name);
  if (!values.every(Number.isInteger)) throw new CaseError(`config '${name}' must hold integers, got ${JSON.stringify(value)}`);
  return { shape, data: Int32Array.from(values) };
}

/** An explicit float list (any nesting) from the config. */
export function floatArray(value: unknown, name: string): Tensor {
  const { shape, values } = flatten(value, name);
  return { shape, data: Float64Array.from(values) };
}

/** The handed inputs, once every name is checked to be there (a CaseError names what is missing). */
export function need(inputs: Record<string, Tensor | IntTensor>, ...names: string[]): Record<string, Tensor> {
  const missing = names.filter((n) => !Object.hasOwn(inputs, n));
  if (missing.length > 0) throw new CaseError(`the handed inputs lack [${missing.join(", ")}]; they hold [${Object.keys(inputs).sort().join(", ")}]`);
  return inputs as Record<string, Tensor>;
}

/** inputs[name], or null when the case has none (valid lengths, positions, a bias). */
export function optional<T extends Tensor | IntTensor = IntTensor>(inputs: Record<string, Tensor | IntTensor>, name: string): T | null {
  return Object.hasOwn(inputs, name) ? inputs[name] as T : null;
}

const FLOAT_WORDS: Record<string, number> = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

/** The tensors a request hands to a case (docs/protocol.md, "Handed inputs"): the `inputs` object
 *  of a golden document, name -> {dtype, shape, data}, read back exactly as golden.ts wrote it
 *  (int64 as integers, float64 as numbers or "NaN", "Infinity", "-Infinity"). */
export function handedInputs(value: unknown, id: string): Record<string, Tensor | IntTensor> {
  const fail = (what: string): never => { throw new CaseError(`the inputs handed to '${id}' ${what}`); };
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`must be an object of tensors, got ${shown(value)}`);
  const named: Record<string, Tensor | IntTensor> = {};
  for (const [name, t] of Object.entries(value as Record<string, { dtype?: unknown; shape?: unknown; data?: unknown }>)) {
    const shape = t?.shape, data = t?.data;
    if (!Array.isArray(shape) || !shape.every((n) => Number.isInteger(n) && n >= 0) || !Array.isArray(data)
      || data.length !== shape.reduce((a: number, n: number) => a * n, 1)) {
      fail(`hold '${name}' without a shape and as many items as its shape says`);
    }
    const items = data as unknown[];
    if (t.dtype === "int64") {
      if (!items.every((v) => Number.isInteger(v) && Math.abs(v as number) < 2 ** 31)) fail(`hold '${name}', int64, with an item that is not a 32-bit integer`);
      named[name] = { shape: [...(shape as number[])], data: Int32Array.from(items as number[]) };
    } else if (t.dtype === "float64") {
      const read = (v: unknown) => (typeof v === "number" ? v : typeof v === "string" && Object.hasOwn(FLOAT_WORDS, v) ? FLOAT_WORDS[v] : fail(`hold '${name}', float64, with the item ${shown(v)}`));
      named[name] = { shape: [...(shape as number[])], data: Float64Array.from(items, read) };
    } else {
      fail(`hold '${name}' of dtype ${shown(t?.dtype)}; the dtypes are float64 and int64`);
    }
  }
  return named;
}

/** The document a request hands to a case (docs/protocol.md, "Handed inputs"): its inputs by name,
 *  a gradient check's parameters as [name, tensor] pairs in order, and the generator's position
 *  after the draws; a CaseError names what is malformed. */
export function handedDocument(value: unknown, id: string): { inputs: Record<string, Tensor | IntTensor>; params: Record<string, Tensor> | null; position: number } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new CaseError(`the document handed to '${id}' must be an object, got ${shown(value)}`);
  const doc = value as { inputs?: unknown; parameters?: unknown; position?: unknown };
  const position = doc.position;
  if (!(Number.isSafeInteger(position) && (position as number) >= 0)) {
    throw new CaseError(`the document handed to '${id}' needs 'position', the generator's counter after the inputs were drawn (an integer >= 0), got ${shown(position)}`);
  }
  const pairs = doc.parameters ?? null;
  if (pairs !== null && !(Array.isArray(pairs) && pairs.every((p) => Array.isArray(p) && p.length === 2 && typeof p[0] === "string")
    && new Set(pairs.map((p) => p[0])).size === pairs.length)) {
    throw new CaseError(`the document handed to '${id}' must list its 'parameters' as [name, tensor] pairs, each name once, in the model's order`);
  }
  const params = pairs === null ? null : handedInputs(Object.fromEntries(pairs), id) as Record<string, Tensor>;
  return { inputs: handedInputs(doc.inputs, id), params, position: position as number };
}
