// SHA-256 written out: the standard's example messages (FIPS 180-2, appendix B: "abc" in one block,
// a 448-bit message whose padding needs a second block), the empty message, block-boundary
// lengths against node:crypto, and float64Digest as the SHA-256 of the parts' little-endian bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { float64Digest, sha256Hex } from "../../src/core/digest.ts";

const ascii = (s: string) => new Uint8Array([...s].map((c) => c.charCodeAt(0)));

test("sha256Hex gives the standard's digests of its example messages", () => {
  assert.equal(sha256Hex(ascii("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(sha256Hex(ascii("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  assert.equal(sha256Hex(new Uint8Array(0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
});

test("sha256Hex agrees with node:crypto at every length around the block and padding boundaries", () => {
  for (const n of [1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000]) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + 11) & 0xff);
    assert.equal(sha256Hex(bytes), createHash("sha256").update(bytes).digest("hex"), `length ${n}`);
  }
});

test("float64Digest hashes each part's little-endian float64 bytes, one part after the other", () => {
  const parts = [Float64Array.of(1.5, -0, NaN), Int32Array.of(3, -7), [2 ** 53, 1e-310]];
  const flat = [1.5, -0, NaN, 3, -7, 2 ** 53, 1e-310];
  const bytes = new Uint8Array(flat.length * 8);
  flat.forEach((x, i) => new DataView(bytes.buffer).setFloat64(8 * i, x, true));
  assert.equal(float64Digest(parts), createHash("sha256").update(bytes).digest("hex"));
  assert.equal(float64Digest([]), sha256Hex(new Uint8Array(0)));
});
