// The documents of the request kinds other than "cases" (docs/protocol.md, "Request kinds";
// twin: requests.py). cli.ts writes each to out_dir/<id>.json and prints its status line, as for
// a case.
//
//   encode   one pretrained encoder run on given token ids (verify inspect): a golden-layout
//            document whose case is the run as a pretrained case, its inputs the ids, its outputs
//              hidden_states  (L + 1, B, T, d)  the embeddings, then each layer's output
//              attentions     (L, B, H, T, T)   every head's weights
//   export   one training case run from its seed, in the form a site replays (docs/training.md,
//            "Export"; verify export): its case, per-step history, what the site shows, the
//            trained parameters and the digests that tie it to the goldens
//
// Shapes: L layers, B rows, T tokens, d hidden features, H heads.

import { CaseError } from "../core/caseConfig.ts";
import { caseDocument, type Json } from "../core/golden.ts";
import { Generator } from "../core/rng.ts";
import { type CaseSpec, runCaseWithStates } from "./cases.ts";
import { type Assets, bertEncoderCase } from "./casesPretrained.ts";

export const KINDS = ["cases", "encode", "export"]; // "cases" is the default: a request without "kind"
export const ITEMS: Record<string, string> = { cases: "cases", encode: "inputs", export: "cases" }; // the request's list of work, per kind
export const EXPORT_VERSION = 1;
const HISTORY = ["loss", "grad_norm"]; // per-step outputs of a training case: the export's history
const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/; // as a case id: also a file name

type Item = { [key: string]: Json };

const repr = (v: unknown): string => (typeof v === "string" ? `'${v}'` : v === undefined ? "None" : JSON.stringify(v));

/** The id of one item of a request: also its file name, so checked as a case id is. */
export function itemId(item: unknown): string {
  const ident = item !== null && typeof item === "object" && !Array.isArray(item) ? (item as Item).id : undefined;
  if (!(typeof ident === "string" && ID.test(ident) && ident.length <= 200)) {
    throw new CaseError(`each item needs an 'id' of letters, digits, '_', '.', '-' (a file name), got ${repr(ident)}`);
  }
  return ident;
}

/** The pretrained case an encode input stands for: {id, kind, op, seed, config}; the mask
 *  defaults to all ones, the token types to zeros (one sentence, unpadded). */
export function encodeCase(item: Item): CaseSpec {
  const ident = itemId(item);
  const model = item.model, ids = item.input_ids;
  if (typeof model !== "string") {
    throw new CaseError(`encode input '${ident}' needs 'model', the name of a model in the request's assets`);
  }
  if (!(Array.isArray(ids) && ids.length > 0 && ids.every(Array.isArray))) {
    throw new CaseError(`encode input '${ident}' needs 'input_ids', a (B, T) list of lists of token ids`);
  }
  const rows = ids as Json[][];
  const config = {
    model,
    input_ids: rows,
    attention_mask: item.attention_mask ?? rows.map((r) => r.map(() => 1)),
    token_type_ids: item.token_type_ids ?? rows.map((r) => r.map(() => 0)),
  };
  return { id: ident, kind: "pretrained", op: "bert_encoder", seed: 0, config };
}

/** The encoder's every hidden state and attention weight on the input's ids (golden layout). */
export function encodeDocument(item: Item, assets?: Assets): { [key: string]: Json } {
  const spec = encodeCase(item);
  const { inputs, outputs } = bertEncoderCase(spec.config ?? {}, new Generator(spec.seed), assets); // draws nothing
  const keptInputs = { input_ids: inputs.input_ids, attention_mask: inputs.attention_mask, token_type_ids: inputs.token_type_ids };
  const keptOutputs = { hidden_states: outputs.hidden_states, attentions: outputs.attentions };
  return caseDocument(spec as unknown as Json, keptInputs, keptOutputs);
}

/** A training case trained from its seed here, as the site replays it: everything to retrain it,
 *  its history, what it shows, the final parameters and the digests. */
export function exportDocument(spec: CaseSpec, assets?: Assets): { [key: string]: Json } {
  const ident = itemId(spec);
  if (spec.kind !== "training") throw new CaseError(`export takes training cases; '${ident}' is of kind ${repr(spec.kind)}`);
  const { doc, states } = runCaseWithStates(spec, assets);
  const steps = (spec.config ?? {}).steps as number;
  const final = states.get(steps);
  if (final === undefined) {
    throw new CaseError(`'${ident}' wrote no state at its last step ${repr(steps)} (it has [${[...states.keys()].sort((a, b) => a - b).join(", ")}])`);
  }
  const outputs = doc.outputs as { [key: string]: Json };
  const finalOutputs = final.outputs as { [key: string]: Json };
  const finalDigests = (final.digests ?? {}) as { [key: string]: Json };
  return {
    export_version: EXPORT_VERSION,
    id: ident,
    op: spec.op,
    seed: spec.seed,
    config: (spec.config ?? {}) as Json,
    generator: doc.generator,
    engine: doc.engine,
    steps,
    history: Object.fromEntries(HISTORY.filter((name) => Object.hasOwn(outputs, name)).map((name) => [name, outputs[name]])),
    shown: Object.fromEntries(Object.entries(outputs).filter(([name]) => !HISTORY.includes(name))),
    parameters: Object.fromEntries(Object.entries(finalOutputs).filter(([name]) => name.startsWith("param."))
      .map(([name, t]) => [name.slice("param.".length), t])),
    digests: { ...((doc.digests ?? {}) as { [key: string]: Json }), final_state: finalDigests.state ?? null },
  };
}

/** The document of one item of a request of this kind (not "cases": the command line runs those). */
export function document(kind: string, item: Item, assets?: Assets): { [key: string]: Json } {
  if (kind === "encode") return encodeDocument(item, assets);
  if (kind === "export") return exportDocument(item as unknown as CaseSpec, assets);
  throw new CaseError(`request kind '${kind}' has no documents here; the kinds are ${KINDS.join(", ")}`);
}
