//! Rounds of a benchmark. Every configuration of a benchmark (an "arm": one
//! side set up one way) runs once per round, in the listed order in even
//! rounds and in the reverse order in odd rounds: A B | B A | A B | B A
//! (ABBA), so that no arm always runs first, last, or right after the same
//! neighbour, and slow drifts of the machine fall on every arm alike.
//!
//! Invariant: [`Samples::of`]`(name)[r]` is the value arm `name` measured in
//! round `r`; every arm has exactly one value per round, or the whole run is
//! an error naming the arm and the round.

use anyhow::{Context, Result};

/// One configuration, named for the rows that use it.
pub struct Arm<A> {
    /// Unique within the benchmark.
    pub name: &'static str,
    /// What to run.
    pub it: A,
}

/// The arms' indices in the order round `round` runs them.
pub fn order(arms: usize, round: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..arms).collect();
    if round % 2 == 1 {
        o.reverse();
    }
    o
}

/// Values per arm and round.
pub struct Samples<T> {
    names: Vec<&'static str>,
    values: Vec<Vec<T>>,
}

impl<T> Samples<T> {
    /// The values of arm `name`, by round.
    ///
    /// # Panics
    /// On a name that is not an arm of this run (a mistake in the benchmark).
    pub fn of(&self, name: &str) -> &[T] {
        let i = self
            .names
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("no arm named {name}"));
        &self.values[i]
    }

    /// `f` of each round's value of arm `name`.
    pub fn map(&self, name: &str, f: impl Fn(&T) -> f64) -> Vec<f64> {
        self.of(name).iter().map(f).collect()
    }
}

/// Runs `rounds` rounds of `arms` (`id` names the benchmark in progress
/// lines); `f` measures one arm once, in a fresh child process.
pub fn run<A, T>(
    id: &str,
    rounds: usize,
    arms: &[Arm<A>],
    mut f: impl FnMut(&Arm<A>) -> Result<T>,
) -> Result<Samples<T>> {
    let mut values: Vec<Vec<T>> = arms.iter().map(|_| Vec::with_capacity(rounds)).collect();
    for round in 0..rounds {
        let t = std::time::Instant::now();
        for i in order(arms.len(), round) {
            let ta = std::time::Instant::now();
            let v = f(&arms[i])
                .with_context(|| format!("{id} arm {} in round {}", arms[i].name, round + 1))?;
            eprintln!(
                "bench: {id} round {} arm {}: {:.1} s",
                round + 1,
                arms[i].name,
                ta.elapsed().as_secs_f64()
            );
            values[i].push(v);
        }
        eprintln!(
            "bench: {id} round {}/{rounds} ({} arms) in {:.1} s",
            round + 1,
            arms.len(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(Samples {
        names: arms.iter().map(|a| a.name).collect(),
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternates_the_order_between_rounds() {
        assert_eq!(order(2, 0), vec![0, 1]);
        assert_eq!(order(2, 1), vec![1, 0]);
        assert_eq!(order(3, 2), vec![0, 1, 2]);
        let arms = [Arm { name: "a", it: 1 }, Arm { name: "b", it: 2 }];
        let mut seen = Vec::new();
        let s = run("T", 4, &arms, |a| {
            seen.push(a.name);
            Ok(a.it * 10)
        })
        .unwrap();
        assert_eq!(seen, vec!["a", "b", "b", "a", "a", "b", "b", "a"]);
        assert_eq!(s.of("b"), &[20, 20, 20, 20]);
        assert_eq!(s.map("a", |x| *x as f64), vec![10.0; 4]);
    }
}
