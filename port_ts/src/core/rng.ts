// The shared generator: Threefry-2x32-20 on a counter, Marsaglia's polar normals.
// Specified bit for bit in docs/generator.md; twin of reference/core/rng.py. Only exactly rounded
// float operations (+, -, *, /, sqrt, scaling by powers of two; ln is mathlib's specLog, built
// from those), so both engines draw the same bits.

import { type Tensor, type IntTensor, sizeOf } from "./ops.ts";
import { specLog } from "./mathlib.ts";

export const GENERATOR = "threefry2x32-20/polar-v1";

const ROT = [13, 15, 26, 6, 17, 29, 16, 24];
const PARITY = 0x1bd11bda;
const TWO_M53 = 2 ** -53;

/** Threefry-2x32, 20 rounds; writes the two output words into out[0], out[1] (as uint32). */
export function threefry2x32(key0: number, key1: number, c0: number, c1: number, out: Uint32Array): void {
  const ks2 = (PARITY ^ key0 ^ key1) >>> 0;
  const ks = [key0 >>> 0, key1 >>> 0, ks2];
  let x0 = (c0 + ks[0]) >>> 0;
  let x1 = (c1 + ks[1]) >>> 0;
  for (let r = 0; r < 20; r++) {
    x0 = (x0 + x1) >>> 0;
    const rot = ROT[r % 8];
    x1 = ((x1 << rot) | (x1 >>> (32 - rot))) >>> 0;
    x1 = (x1 ^ x0) >>> 0;
    if (r % 4 === 3) {
      const i = (r + 1) / 4;
      x0 = (x0 + ks[i % 3]) >>> 0;
      x1 = (x1 + ks[(i + 1) % 3] + i) >>> 0;
    }
  }
  out[0] = x0;
  out[1] = x1;
}

/** A stream of draws from seed (0 <= seed < 2**53). State: the next counter. */
export class Generator {
  readonly seed: number;
  readonly key0: number;
  readonly key1: number;
  counter = 0;
  private readonly words = new Uint32Array(2);

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new RangeError(`seed must be an integer in [0, 2**53), got ${seed}`);
    }
    this.seed = seed;
    this.key0 = seed % 4294967296;
    this.key1 = Math.floor(seed / 4294967296);
  }

  /** One double in [0, 1) from one counter: ((x0 >>> 5) * 2**26 + (x1 >>> 6)) * 2**-53. */
  nextDouble(): number {
    const i = this.counter++;
    threefry2x32(this.key0, this.key1, i % 4294967296, Math.floor(i / 4294967296), this.words);
    return ((this.words[0] >>> 5) * 67108864 + (this.words[1] >>> 6)) * TWO_M53;
  }

  /** U[low, high) in row-major order of shape. */
  uniform(shape: number[], low = 0, high = 1): Tensor {
    const data = new Float64Array(sizeOf(shape));
    for (let i = 0; i < data.length; i++) data[i] = low + (high - low) * this.nextDouble();
    return { shape: [...shape], data };
  }

  /** N(mean, std**2) by the polar method; pairs give a*f then b*f; an odd count drops the last. */
  normal(shape: number[], mean = 0, std = 1): Tensor {
    const n = sizeOf(shape);
    const data = new Float64Array(n);
    let got = 0;
    while (got < n) {
      const a = 2 * this.nextDouble() - 1;
      const b = 2 * this.nextDouble() - 1;
      const s = a * a + b * b;
      if (!(s > 0 && s < 1)) continue;
      const f = Math.sqrt((-2 * specLog(s)) / s);
      data[got++] = mean + std * (a * f);
      if (got < n) data[got++] = mean + std * (b * f);
    }
    return { shape: [...shape], data };
  }

  /** Integers in [low, high): low + floor(u * (high - low)). */
  integers(shape: number[], low: number, high: number): IntTensor {
    const data = new Int32Array(sizeOf(shape));
    for (let i = 0; i < data.length; i++) data[i] = low + Math.floor(this.nextDouble() * (high - low));
    return { shape: [...shape], data };
  }

  /** Dropout's keep mask: 1 where u >= p, else 0. */
  keepMask(shape: number[], p: number): Tensor {
    const data = new Float64Array(sizeOf(shape));
    for (let i = 0; i < data.length; i++) data[i] = this.nextDouble() >= p ? 1 : 0;
    return { shape: [...shape], data };
  }

  /** Fisher-Yates: for i = n-1 down to 1, swap i with j = floor(u * (i + 1)). */
  permutation(n: number): Int32Array {
    const perm = new Int32Array(n);
    for (let i = 0; i < n; i++) perm[i] = i;
    for (let i = n - 1; i >= 1; i--) {
      const j = Math.floor(this.nextDouble() * (i + 1));
      const t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    return perm;
  }
}
