// The port's unit tests as the second stage of the mutation check (docs/faults.md, "Mutation
// testing"):   node mutation/units.ts
// runs every port_ts/test/**/*.test.ts in this one process (no process per file), one file after
// another, and exits 1 at the first failing test, 0 when all pass. Stryker's command is
// `node mutation/check.ts && node mutation/units.ts`: the catalogue's cases first (they kill most
// mutants within a second), then the unit tests, which reach what no valid case reaches (shape
// and parameter checks, their messages, edge inputs, hostile files). Under Stryker,
// only the test files whose tests reached the active mutant in Stryker's dry run run
// (coverage.ts); the dry run runs each file in its own process to tell the files' coverage apart.
// So kernels/product.test.ts (1.5 s of random shapes) runs only for mutants of the files it reaches.

import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { run } from "node:test";
import { activeMutant, cannotReach, countUnder, recordCoverage } from "./coverage.ts";

const dir = join(import.meta.dirname, "..", "test");
const files = (readdirSync(dir, { recursive: true }) as string[])
  .filter((f) => f.endsWith(".test.ts"))
  .sort()
  .map((f) => join(dir, f));

const nameOf = (file: string) => `units:${basename(file)}`;

/** Runs the files in this process (node:test runs in-process tests once per process); exit 1 on
 *  the first failure. record: the dry run's child, counting what its one file reaches. */
function runFiles(chosen: string[], skipped: number, record?: string): void {
  let failed = 0, passed = 0;
  if (record) countUnder(record);
  const stream = run({ files: chosen, isolation: "none", concurrency: 1 });
  stream.on("test:fail", (event) => {
    if (event.details?.type === "suite") return; // a suite fails through its tests: count those
    if (failed++ === 0) {
      const message = String((event.details?.error as Error | undefined)?.message ?? "").split("\n")[0];
      process.stdout.write(`FAIL ${event.name}${event.file ? ` (${basename(event.file)})` : ""}: ${message}\n`);
    }
  });
  stream.on("test:pass", (event) => { if (event.details?.type !== "suite") passed++; });
  stream.on("test:summary", (event) => {
    if (event.file !== undefined) return; // a file's own summary; the one without a file is the total
    if (record) {
      countUnder(undefined);
      recordCoverage([record]);
    }
    process.stdout.write(failed ? `${failed} unit test(s) failed\n`
      : `${passed} unit tests pass` + (skipped ? ` (${skipped} files cannot reach mutant ${activeMutant})\n` : "\n"));
    process.exitCode = failed || !event.success ? 1 : 0;
  });
  stream.resume();
}

/** An instrumented sandbox copy (Stryker's), not the checkout. */
function instrumented(): boolean {
  const src = join(dir, "..", "src");
  return (readdirSync(src, { recursive: true }) as string[])
    .some((f) => f.endsWith(".ts") && readFileSync(join(src, f), "utf8").includes("stryNS_9fa48"));
}

if (process.argv[2] === "--record") {
  runFiles([process.argv[3]], 0, nameOf(process.argv[3]));
} else if (activeMutant === undefined && instrumented()) {
  // Stryker's dry run: each file in a process of its own, so each file's coverage is its own.
  let status = 0;
  for (const file of files) {
    const child = spawnSync(process.execPath, [import.meta.filename, "--record", file], { stdio: "inherit" });
    status ||= child.status ?? 1;
  }
  process.exitCode = status;
} else {
  const chosen = files.filter((file) => !cannotReach(nameOf(file))); // all of them outside a mutant run
  if (chosen.length === 0) process.stdout.write(`no unit test reaches mutant ${activeMutant}\n`);
  else runFiles(chosen, files.length - chosen.length);
}
