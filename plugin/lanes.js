// What a search answer lacks because a lane gave nothing: said to the agent and the user so that "no hits"
// is never read as "nothing matches" when the sidecar's keyword lane ran out of time (a new sidecar's first
// queries on a large store, a loaded server) or its vector lane could not run. The sidecar says which in
// /v1/search's answer (`skipped`); an older sidecar does not, and nothing is said.

/** The note for a hybrid search's answer, or null when both lanes answered. */
export function lanesMissed(answer) {
  const skipped = answer?.skipped;
  if (skipped === "deadline") {
    return "The search ran out of time before either lane answered: no hits here does not mean nothing matches; ask again.";
  }
  if (skipped === "keyword_deadline") {
    return "The keyword lane ran out of time and gave no hits: these are the meaning (vector) lane's alone; ask again for exact words.";
  }
  if (skipped === "vector_unavailable") {
    return "The meaning (vector) lane gave nothing (its embedding model is unavailable or was too slow): any hits here are keyword matches alone, and none does not mean nothing matches.";
  }
  return null;
}
