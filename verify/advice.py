"""What to do about a case, from what differs (one situation per decided report entry; the table of
them is in docs/guide.md, "What to do when it fails"), and where to start when many cases fail (the
primitive that explains the others, by the ops' declared `uses`)."""

from .records import FAILED, ErrorKind, errors_of

ENGINE, REFERENCE_CHANGED, PORT_DIFFERS = "engine", "reference changed", "port differs"
CASE_CHANGED, BOTH_CHANGED, GOLDEN_STALE = "case changed", "both changed", "golden stale"
NEW_CASE, DRIFT = "new case", "golden drift"


def disagreement(entry):
    """Evidence that the engines disagree (anything but the goldens and the engines' own errors)."""
    found = [t for t in entry["tensors"] if t.get("status") == FAILED]
    found += [c for c in entry["checks"] if not c["passed"] and c.get("required", "always") == "always"]
    found += [r for r in entry["replay"] if not r["passed"]]
    evaluation = entry.get("evaluation")
    if evaluation and (evaluation["error"] or any(t.get("status") == FAILED and not t.get("near_tie")
                                                  for t in evaluation["tensors"])):
        found.append(evaluation)
    return found


def situation(entry):
    """(situation, advice) of a decided entry, or None when there is nothing to say."""
    case_id, details = entry["id"], entry["golden_details"]
    regen = f"verify regen attention --case {case_id}"
    engine_errors = errors_of(entry, ErrorKind.ENGINE)
    if entry.get("status") == "not run":
        return ENGINE, entry["errors"][0] if entry["errors"] else "not run"
    if engine_errors:
        return ENGINE, f"an engine could not answer: {engine_errors[0]}; fix that engine first"
    stale = {role: d for role, d in details.items() if d["status"] == "stale"}
    if any(not c["passed"] and c["engine"] == "reference" for c in entry["checks"]):  # a gradcheck bound, a bar
        return PORT_DIFFERS, (f"the reference breaks its own check here: fix the reference "
                              f"(verify attention --case {case_id})")
    if disagreement(entry):
        if "reference" in stale and "port" not in stale and details.get("port", {}).get("status") != "missing":
            return REFERENCE_CHANGED, ("the reference no longer computes what its golden holds, the port still does: "
                                       "if the reference's change is intended, change the port to follow it, then "
                                       f"`{regen}`; otherwise undo it (`verify diff` shows the goldens' values; "
                                       "`--force` would write goldens that disagree)")
        return PORT_DIFFERS, (f"the port disagrees with the reference: fix the port; the case alone: "
                              f"verify attention --case {case_id}")
    if stale:
        if any("its case differs" in d["detail"] for d in stale.values()):
            return CASE_CHANGED, f"the case changed in the catalogue since its goldens were written: `{regen}`"
        written = ", ".join(d["file"] for d in stale.values())
        if len(stale) == 1:
            return GOLDEN_STALE, (f"the engines agree, but {written} holds other values than its engine computes (an edited "
                                  f"golden, or a change both engines made together that only one golden records): "
                                  f"`{regen}` rewrites it (`verify diff` shows by how much)")
        return BOTH_CHANGED, (f"both engines changed and still agree: if that is intended, `{regen}` rewrites {written} "
                              "(`verify diff` shows by how much)")
    if any(d["status"] == "missing" for d in details.values()):
        return NEW_CASE, f"a case without goldens yet: `{regen}` writes them"
    if entry["passed"] and any(d["status"] in ("parted", "drift") for d in details.values()):
        return DRIFT, f"nothing to do; `{regen}` makes the goldens byte-identical again"
    return None


def engines_disagree(entry):
    """A failing case on which the engines disagree: what the arbiter and the attribution look at
    (not a stale golden alone, not an engine that could not answer, not the reference's own check)."""
    return (not entry["passed"] and (situation(entry) or ("",))[0] in (PORT_DIFFERS, REFERENCE_CHANGED)
            and bool(disagreement(entry)))


def root_causes(failing, declarations):
    """Where to start: [(op, its failing cases, the other failing cases that build on it)] for each
    failing op that fails on its own (none of the ops it builds on fails), most explained first."""
    ops = {c["op"] for c in failing}
    found = []
    for op in sorted(ops):
        if declarations.uses(op) & ops:
            continue
        own = [c for c in failing if c["op"] == op]
        explained = [c for c in failing if c["op"] != op and op in declarations.uses(c["op"])]
        found.append((op, own, explained))
    return sorted(found, key=lambda r: (-len(r[2]), declarations.depth(r[0]), r[0]))


def leaf_to_root(cases, declarations):
    """The cases ordered primitives first: by the depth of their op, then as they came."""
    order = {id(c): n for n, c in enumerate(cases)}
    return sorted(cases, key=lambda c: (declarations.depth(c["op"]), order[id(c)]))
