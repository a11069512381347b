// Forget the surviving mutants of some files, so that Stryker's next incremental run tests them
// again (docs/faults.md, "Mutation testing"): after checks were added, a survivor's old result
// would otherwise be reused, since its code did not change.
//   node mutation/retest.ts src/a.ts [src/b.ts ...] [--results path]
// (default results: ../reports/stryker-incremental.json). Killed and timed-out results stay.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
const at = args.indexOf("--results");
const path = at >= 0 ? args.splice(at, 2)[1] : join(import.meta.dirname, "..", "..", "reports", "stryker-incremental.json");
if (args.length === 0 || !existsSync(path)) {
  process.stderr.write(args.length === 0 ? "usage: node mutation/retest.ts src/FILE.ts ... [--results PATH]\n"
    : `mutation/retest.ts: no results at ${path}; run Stryker first (docs/faults.md)\n`);
  process.exit(2);
}
const results = JSON.parse(readFileSync(path, "utf8")) as { files: Record<string, { mutants: { status: string }[] }> };
let unknown = 0;
for (const file of args) {
  const entry = results.files[file];
  if (entry === undefined) {
    process.stderr.write(`mutation/retest.ts: ${file} has no results (files look like src/core/ops.ts)\n`);
    unknown++;
    continue;
  }
  const before = entry.mutants.length;
  entry.mutants = entry.mutants.filter((m) => m.status !== "Survived");
  process.stdout.write(`${file}: ${before - entry.mutants.length} survivors will be tested again\n`);
}
writeFileSync(path, JSON.stringify(results));
process.exitCode = unknown ? 2 : 0;
