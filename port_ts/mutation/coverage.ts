// Which checks can reach which mutant: coverage-based selection for the mutation checks
// (docs/faults.md, "Mutation testing"). Stryker's command runner cannot do this itself, so the two
// checks (check.ts: the catalogue's cases; units.ts: the unit tests) do it with the counters that
// Stryker's instrumentation keeps anyway.
//
// Stryker compiles every mutant of the mutated files into one sandbox copy of the source; a call
// stryCov_9fa48("id", ...) at each mutant's place counts, in globalThis.__stryker__.mutantCoverage,
// how often the place was reached: under perTest[currentTestId] while currentTestId is set, under
// `static` otherwise (module top level, reached on import). The dry run (no active mutant, the
// code unchanged) runs everything and writes, per check, which mutants each case or the unit tests
// reach. A mutant run (__STRYKER_ACTIVE_MUTANT__ set) then runs only what reaches that mutant: up
// to the mutant's place the mutated program runs exactly as the dry run did, so a case that never
// reached the place in the dry run computes the same output with the mutant active, and cannot
// kill it. Static mutants (on the import path) run everything. With no coverage file (outside a
// sandbox, or a dry run that did not write it) everything runs.

import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

type Counts = Record<string, number>;
type Namespace = {
  currentTestId?: string;
  mutantCoverage?: { static: Counts; perTest: Record<string, Counts> };
};
/** check name (e.g. "case:mha.basic", "units") -> the ids of the mutants it reached; "static": the import path. */
type CoverageFile = Record<string, string[]>;

const FILE = join(process.cwd(), ".mutation-coverage.json"); // the sandbox's directory, where Stryker runs the command

function namespace(): Namespace | undefined {
  return (globalThis as { __stryker__?: Namespace }).__stryker__;
}

/** The active mutant's id, or undefined in the dry run and outside Stryker. */
export const activeMutant: string | undefined = process.env.__STRYKER_ACTIVE_MUTANT__;

/** True when the dry run recorded coverage for `check` and the active mutant is neither reached
 *  by it nor on the import path: running `check` cannot kill the mutant. */
export function cannotReach(check: string): boolean {
  if (activeMutant === undefined) return false;
  const coverage = recorded();
  if (coverage === null) return false;
  if (!(check in coverage) || (coverage.static ?? []).includes(activeMutant)) return false;
  return !coverage[check].includes(activeMutant);
}

let readOnce: CoverageFile | null | undefined; // a mutant run reads the dry run's file once, not per check

function recorded(): CoverageFile | null {
  if (readOnce === undefined) readOnce = existsSync(FILE) ? JSON.parse(readFileSync(FILE, "utf8")) as CoverageFile : null;
  return readOnce;
}

/** From now on, outside a mutant run, counts what is reached under `check` (undefined: under no
 *  check); the counting itself happens only in an instrumented copy. */
export function countUnder(check: string | undefined): void {
  if (activeMutant !== undefined) return;
  // The namespace may not exist yet (no instrumented module imported so far, as in units.ts before
  // the test files load): create it as the instrumentation would, so it finds the check's name.
  const g = globalThis as { __stryker__?: Namespace };
  (g.__stryker__ ??= {}).currentTestId = check;
}

/** In the dry run of an instrumented copy: adds what `checks` reached (and the import path) to the
 *  coverage file, which the mutant runs read. */
export function recordCoverage(checks: string[]): void {
  const cov = namespace()?.mutantCoverage; // only in an instrumented copy
  if (activeMutant !== undefined || cov === undefined) return;
  const file: CoverageFile = existsSync(FILE) ? JSON.parse(readFileSync(FILE, "utf8")) as CoverageFile : {};
  file.static = [...new Set([...(file.static ?? []), ...Object.keys(cov.static)])];
  for (const check of checks) file[check] = Object.keys(cov.perTest[check] ?? {});
  writeFileSync(`${FILE}.tmp`, JSON.stringify(file));
  renameSync(`${FILE}.tmp`, FILE); // whole or not at all
}
