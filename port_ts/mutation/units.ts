// The port's unit tests as the second stage of the mutation check (docs/faults.md, "Mutation
// testing"):   node mutation/units.ts
// runs every port_ts/test/*.test.ts but ops.test.ts in this one process (no process per file),
// one file after another, and exits 1 at the first failing test, 0 when all pass. Stryker's
// command is `node mutation/check.ts && node mutation/units.ts`: the catalogue's cases first
// (they kill most mutants within a second), then the unit tests, which reach what no valid case
// reaches (shape and parameter checks, their messages, edge inputs). ops.test.ts is left out: its
// thousands of random shapes take 4 s, and every case already runs the products it checks.

import { readdirSync } from "node:fs";
import { join } from "node:path";
import { run } from "node:test";

const dir = join(import.meta.dirname, "..", "test");
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".test.ts") && f !== "ops.test.ts")
  .sort()
  .map((f) => join(dir, f));

let failed = 0;
const stream = run({ files, isolation: "none", concurrency: 1 });
stream.on("test:fail", (event) => {
  if (event.details?.type === "suite") return; // a suite fails through its tests: count those
  failed++;
  if (failed === 1) {
    const where = event.file ? ` (${event.file.split("/").pop()})` : "";
    process.stdout.write(`FAIL ${event.name}${where}: ${String((event.details?.error as Error | undefined)?.message ?? "").split("\n")[0]}\n`);
  }
});
stream.on("test:summary", (event) => {
  if (event.file !== undefined) return; // per-file summaries; the last one (no file) is the total
  process.stdout.write(failed ? `${failed} unit test(s) failed\n` : `${event.counts.passed} unit tests pass\n`);
  process.exitCode = failed || !event.success ? 1 : 0;
});
stream.resume();
