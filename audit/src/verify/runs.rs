//! Which entries of a file are out of order: those outside every longest strictly increasing
//! run of its seqs (so one line moved away is named alone, and both lines of a swapped pair).

use std::collections::HashMap;

/// For a sequence of seqs in file order: which are outside at least one of its longest
/// strictly increasing subsequences. In an intact file none is; of a swapped pair both are;
/// of one line moved away, that line.
pub(super) fn outside_every_longest_run(seqs: &[u64]) -> Vec<bool> {
    let ending = longest_runs_ending_at(seqs.iter().copied());
    let mut starting = longest_runs_ending_at(seqs.iter().rev().map(|s| u64::MAX - s));
    starting.reverse();
    let best = ending.iter().copied().max().unwrap_or(0);
    let on_some: Vec<bool> = (0..seqs.len())
        .map(|i| ending[i] + starting[i] - 1 == best)
        .collect();
    let mut at_length: HashMap<usize, usize> = HashMap::new();
    for i in (0..seqs.len()).filter(|i| on_some[*i]) {
        *at_length.entry(ending[i]).or_default() += 1;
    }
    (0..seqs.len())
        .map(|i| !(on_some[i] && at_length[&ending[i]] == 1))
        .collect()
}

/// For each position, the length of the longest strictly increasing subsequence ending there.
fn longest_runs_ending_at(values: impl Iterator<Item = u64>) -> Vec<usize> {
    let mut tails: Vec<u64> = Vec::new();
    values
        .map(|v| {
            let at = tails.partition_point(|t| *t < v);
            if at == tails.len() {
                tails.push(v);
            } else {
                tails[at] = v;
            }
            at + 1
        })
        .collect()
}
