//! Natural loops of one function (issue 34, `--loops N`), found on the instruction-level CFG of
//! [`crate::analysis`].
//!
//! Definitions (Aho, Lam, Sethi, Ullman, "Compilers", 2nd ed., section 9.6): block `h`
//! dominates `b` when every path from the function's entry to `b` passes through `h`; an edge
//! `u -> h` whose target dominates its source is a back edge; the natural loop of header `h` is
//! `h` plus every block that reaches a back-edge source `u` without passing through `h` (the
//! loops of all back edges into one header are merged). A retreating edge of a depth-first walk
//! whose target does not dominate its source enters a cycle with more than one entry (an
//! irreducible region): it is counted and its cycle gets no scope. Dominators are computed with
//! the iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance
//! Algorithm", 2001) over the blocks in reverse post-order.
//!
//! The scopes themselves are planned with the inlined-function scopes ([`crate::inlined`]):
//! a loop's region is its body, so markers go on the edges that enter the header from outside
//! and on every exit edge, never on the back edge.

use std::collections::BTreeSet;

use crate::analysis::Func;

/// One natural loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// Instruction index of the header (first instruction of the header block).
    pub header: usize,
    /// Instruction indices of the body, ascending (header included).
    pub body: Vec<usize>,
    /// Index (into [`Loops::loops`]) of the smallest loop that contains this one.
    pub parent: Option<usize>,
    /// Nesting depth among loops: 1 for an outermost loop.
    pub depth: u32,
    /// Instruction indices of the last instructions of the back-edge sources (the instructions
    /// whose edge goes back to the header), ascending.
    pub latches: Vec<usize>,
}

/// The loops of one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loops {
    /// Natural loops, outer loops before the loops they contain.
    pub loops: Vec<Loop>,
    /// Irreducible regions: instruction indices of the targets of retreating edges whose
    /// target does not dominate the source (one per target), ascending.
    pub irreducible: Vec<usize>,
}

/// Finds the natural loops and irreducible regions of `f` reachable from its first
/// instruction.
pub fn find(f: &Func) -> Loops {
    let n = f.insts.len();
    if n == 0 {
        return Loops::default();
    }
    // Blocks: a block ends at an instruction whose successors are not exactly the next one, and
    // starts at every branch target.
    let mut starts: BTreeSet<usize> = BTreeSet::from([0]);
    for i in 0..n {
        let mut succ = f.successors(i).peekable();
        let plain = succ.peek() == Some(&(i + 1)) && f.successors(i).count() == 1;
        if !plain && i + 1 < n {
            starts.insert(i + 1);
        }
        for s in f.successors(i).filter(|&s| s != i + 1 && s < n) {
            starts.insert(s);
        }
    }
    let starts: Vec<usize> = starts.into_iter().collect();
    let block_of = |i: usize| starts.partition_point(|&s| s <= i) - 1;
    let nb = starts.len();
    let end = |b: usize| starts.get(b + 1).copied().unwrap_or(n);
    let succs: Vec<Vec<usize>> = (0..nb)
        .map(|b| {
            let mut v: Vec<usize> = f
                .successors(end(b) - 1)
                .filter(|&s| s < n)
                .map(block_of)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(b);
        }
    }
    // Depth-first walk from the entry: post-order and retreating edges (to a block on the
    // walk's stack).
    let mut post: Vec<usize> = Vec::with_capacity(nb);
    let mut state = vec![0u8; nb]; // 0 unseen, 1 on stack, 2 done
    let mut retreating: Vec<(usize, usize)> = Vec::new();
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    state[0] = 1;
    while let Some(&mut (b, ref mut next)) = stack.last_mut() {
        if let Some(&s) = succs[b].get(*next) {
            *next += 1;
            match state[s] {
                0 => {
                    state[s] = 1;
                    stack.push((s, 0));
                }
                1 => retreating.push((b, s)),
                _ => {}
            }
        } else {
            state[b] = 2;
            post.push(b);
            stack.pop();
        }
    }
    let mut rpo_num = vec![usize::MAX; nb];
    for (k, &b) in post.iter().rev().enumerate() {
        rpo_num[b] = k;
    }
    // Immediate dominators (Cooper, Harvey, Kennedy), by block; the entry is its own.
    let mut idom = vec![usize::MAX; nb];
    idom[0] = 0;
    let mut changed = true;
    while changed {
        changed = false;
        for &b in post.iter().rev().skip(1) {
            let mut new = usize::MAX;
            for &p in &preds[b] {
                if idom[p] == usize::MAX {
                    continue;
                }
                new = if new == usize::MAX {
                    p
                } else {
                    let (mut x, mut y) = (p, new);
                    while x != y {
                        while rpo_num[x] > rpo_num[y] {
                            x = idom[x];
                        }
                        while rpo_num[y] > rpo_num[x] {
                            y = idom[y];
                        }
                    }
                    x
                };
            }
            if new != idom[b] {
                idom[b] = new;
                changed = true;
            }
        }
    }
    let dominates = |h: usize, mut b: usize| loop {
        if b == h {
            return true;
        }
        if b == 0 || idom[b] == usize::MAX {
            return false;
        }
        b = idom[b];
    };
    let mut out = Loops::default();
    let mut irreducible = BTreeSet::new();
    // Back edges by header.
    let mut back: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for &(u, h) in &retreating {
        if dominates(h, u) {
            back.entry(h).or_default().push(u);
        } else {
            irreducible.insert(starts[h]);
        }
    }
    // Any other back edge (u -> h with h dominating u) is retreating in every depth-first walk,
    // so `retreating` holds all of them.
    let mut bodies: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    for (h, us) in back {
        let mut latches: Vec<usize> = us.iter().map(|&u| end(u) - 1).collect();
        latches.sort_unstable();
        latches.dedup();
        let mut inside = vec![false; nb];
        inside[h] = true;
        let mut work: Vec<usize> = us.into_iter().filter(|&u| !inside[u]).collect();
        for &u in &work {
            inside[u] = true;
        }
        while let Some(b) = work.pop() {
            for &p in &preds[b] {
                if !inside[p] && rpo_num[p] != usize::MAX {
                    inside[p] = true;
                    work.push(p);
                }
            }
        }
        let blocks: Vec<usize> = (0..nb).filter(|&b| inside[b]).collect();
        bodies.push((h, blocks, latches));
    }
    // Outer loops first: a loop containing another is larger.
    bodies.sort_by_key(|(h, b, _)| (std::cmp::Reverse(b.len()), *h));
    let mut loops: Vec<Loop> = Vec::with_capacity(bodies.len());
    let mut block_sets: Vec<Vec<usize>> = Vec::with_capacity(bodies.len());
    for (h, blocks, latches) in bodies {
        // The smallest earlier loop holding the header holds the whole loop (natural loops
        // with different headers are nested or disjoint).
        let parent = (0..loops.len())
            .rev()
            .find(|&l| block_sets[l].binary_search(&h).is_ok());
        let depth = parent.map_or(1, |p| loops[p].depth + 1);
        let body = blocks.iter().flat_map(|&b| starts[b]..end(b)).collect();
        loops.push(Loop {
            header: starts[h],
            body,
            parent,
            depth,
            latches,
        });
        block_sets.push(blocks);
    }
    out.loops = loops;
    out.irreducible = irreducible.into_iter().collect();
    out
}
