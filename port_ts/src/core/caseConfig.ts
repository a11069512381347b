// Reading a case's configuration, with errors that say what is wrong (twin: case_config.py).

import { type Tensor, type IntTensor } from "./ops.ts";

export type Config = { [key: string]: unknown };

/** A case's configuration is malformed; the message says what was expected and found. */
export class CaseError extends Error {}

export function get<T = unknown>(config: Config, key: string, fallback?: T): T {
  if (key in config) return config[key] as T;
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
