//! A generator of admitted config judged by real Envoy: takes a seed and a count, yields random
//! AuthorizationPolicies, RequestAuthentications and mutated corpus VirtualServices, DestinationRules, Gateways and
//! EnvoyFilters ([`policy`], [`mutate`]), keeps those admitpilot admits ([`admission`]: validation, then the
//! webhook's effect check), and loads them in batches onto a real Envoy through admitpilot's xDS server
//! ([`oracle`]), bisecting a batch Envoy rejects or crashes on down to the object that does it.
//!
//! Randomness is proptest's ChaCha [`TestRng`] seeded from one `u64`, so a seed reproduces a run exactly.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod admission;
pub mod base;
pub mod mutate;
pub mod oracle;
pub mod policy;

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// A seeded random source with the few draws the generators need. While [`Rng::junk_allowed`] is set (for a
/// share of the documents), generators also draw values the validator refuses.
pub struct Rng(TestRng, bool);

impl Rng {
    /// The generator of `seed` (the same seed always gives the same draws).
    pub fn new(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes), false)
    }

    /// Allows or forbids drawing refused values (see [`Rng::junk`]).
    pub fn junk_allowed(&mut self, allowed: bool) {
        self.1 = allowed;
    }

    /// True `percent` times in a hundred while refused values are allowed, else never.
    pub fn junk(&mut self, percent: usize) -> bool {
        self.1 && self.percent(percent)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    /// True `percent` times in a hundred.
    pub fn percent(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A raw 64-bit draw.
    #[allow(clippy::should_implement_trait)] // an endless stream, never an Iterator
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
}

/// The run's settings from the environment: `ADMITPILOT_GEN_SEED` (default `default_seed`) and
/// `ADMITPILOT_GEN_COUNT` (default `default_count`), printed so that a run can be repeated.
pub fn settings(default_seed: u64, default_count: usize) -> (u64, usize) {
    let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let seed = read("ADMITPILOT_GEN_SEED").map_or(default_seed, |v| {
        v.parse().expect("ADMITPILOT_GEN_SEED is a u64")
    });
    let count = read("ADMITPILOT_GEN_COUNT").map_or(default_count, |v| {
        v.parse().expect("ADMITPILOT_GEN_COUNT is a number")
    });
    println!("generator: seed {seed}, {count} objects (ADMITPILOT_GEN_SEED / ADMITPILOT_GEN_COUNT to change)");
    (seed, count)
}

/// The base config on `ports` (HTTP, HTTPS, MUTUAL, TCP, TLS, …), an admission holding it as the live config, and a
/// real Envoy (`binary`) loaded with it through admitpilot's xDS.
pub async fn base_admission_and_oracle(
    binary: &std::path::Path,
    ports: Vec<u16>,
) -> (base::Base, admission::Admission, oracle::Oracle) {
    let config = base::base(ports.clone());
    let admission = admission::Admission::new(config.snapshot(), base::proxy());
    let oracle = oracle::Oracle::start(
        binary,
        config.snapshot(),
        &base::node_metadata(),
        (ports[0], ports[1], ports[3]),
    )
    .await;
    (config, admission, oracle)
}
