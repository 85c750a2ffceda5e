//! RE2-style regular expressions (pure): takes a pattern, answers whether Envoy would take it, at a bounded cost.
//!
//! Istio checks regexes with Go's `regexp.Compile` and a length limit (`validateStringMatchRegexp`); Envoy then
//! compiles them with RE2 and rejects a program of more than 100 instructions (runtime
//! `re2.max_program_size.error_level`), so a pattern Istio admits can still be NACKed. Here a pattern is:
//! 1. at most [`REGEX_MAX_LEN`] bytes;
//! 2. parsed as RE2 reads it (`\w`, `\d`, `\s` and `\b` are ASCII), and when it has no Unicode property classes,
//!    given a lower bound of its RE2 program size ([`re2_program_size_at_least`], checked against Envoy with real
//!    Envoy in `tests/e2e/envoy_validate.rs`): over Envoy's limit is an error naming the limit;
//! 3. compiled to a Thompson NFA within [`REGEX_COMPILED_SIZE_LIMIT`], after a cheap estimate of that NFA's size
//!    ([`nfa_weight`]) has ruled out patterns too large to try.
//!
//! Verdicts are cached per thread by pattern text, so a pattern repeated across an object costs one check, and the
//! NFA work one object may cause is capped ([`REGEX_WORK_PER_OBJECT`], reset by [`start_object`]).

use std::cell::{Cell, RefCell};

use ahash::AHashMap;
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;

use admitpilot_model::re2::{
    nfa_weight, re2_program_size_at_least, re2_reading, ENVOY_RE2_PROGRAM_LIMIT,
};

/// Istio's limit on regex length.
pub const REGEX_MAX_LEN: usize = 1024;
/// Compiled-size limit used while checking a regex (bounds the work a hostile pattern can cause).
pub const REGEX_COMPILED_SIZE_LIMIT: usize = 4 << 20;
/// Patterns whose [`nfa_weight`] exceeds this are too large to compile within [`REGEX_COMPILED_SIZE_LIMIT`].
const NFA_WEIGHT_LIMIT: u64 = 100_000;
/// The total [`nfa_weight`] of the patterns one object may have compiled; beyond it, patterns are refused.
pub const REGEX_WORK_PER_OBJECT: u64 = 1_000_000;
/// Patterns whose verdict a thread remembers; the memory is cleared when full.
const CACHE_ENTRIES: usize = 4096;

thread_local! {
    static VERDICTS: RefCell<AHashMap<Box<str>, Result<(), String>>> = RefCell::new(AHashMap::default());
    static WORK_LEFT: Cell<u64> = const { Cell::new(REGEX_WORK_PER_OBJECT) };
}

/// Starts the regex work allowance of a new object on this thread (called once per object validated).
pub fn start_object() {
    WORK_LEFT.with(|left| left.set(REGEX_WORK_PER_OBJECT));
}

/// Checks an RE2-style regex (see the module documentation); `Err` holds the message for the user.
pub fn check_regex(re: &str) -> Result<(), String> {
    if re.len() > REGEX_MAX_LEN {
        return Err(format!(
            "regex is too long ({} > {REGEX_MAX_LEN} characters)",
            re.len()
        ));
    }
    if let Some(verdict) = VERDICTS.with(|cache| cache.borrow().get(re).cloned()) {
        return verdict;
    }
    if super::deadline::expired() {
        // Not checked; the object's validation ends with an error saying the time ran out.
        return Ok(());
    }
    let verdict = check_uncached(re);
    // A refusal for lack of allowance says nothing about the pattern itself: not remembered.
    if !matches!(&verdict, Err(e) if e.contains(WORK_EXHAUSTED)) {
        VERDICTS.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(re.into(), verdict.clone());
        });
    }
    verdict
}

const WORK_EXHAUSTED: &str = "too many large regexes in one object";

fn check_uncached(re: &str) -> Result<(), String> {
    let invalid =
        |detail: &str| format!("invalid regex {re:?}: {detail} (Istio regexes use RE2 syntax)");
    // RE2's reading: ASCII Perl classes; a pattern with Unicode property classes needs the Unicode parse.
    let hir = match syntax::parse_with(re, &re2_reading()) {
        Ok(hir) => {
            let size = re2_program_size_at_least(&hir);
            if size > ENVOY_RE2_PROGRAM_LIMIT {
                return Err(format!(
                    "regex {re:?} compiles to an RE2 program of at least {size} instructions; Envoy rejects more \
                     than {ENVOY_RE2_PROGRAM_LIMIT} (runtime re2.max_program_size.error_level)"
                ));
            }
            hir
        }
        Err(_) => syntax::parse(re).map_err(|e| {
            let text = e.to_string();
            invalid(text.lines().last().unwrap_or_default())
        })?,
    };
    let weight = nfa_weight(&hir);
    if weight > NFA_WEIGHT_LIMIT {
        return Err(invalid("regex compiles too large"));
    }
    let allowed = WORK_LEFT.with(|left| {
        let remaining = left.get();
        left.set(remaining.saturating_sub(weight));
        remaining >= weight
    });
    if !allowed {
        return Err(format!(
            "regex {re:?} not checked: {WORK_EXHAUSTED} (their compiled size may total \
             {REGEX_WORK_PER_OBJECT}); split the object or simplify its regexes"
        ));
    }
    thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .nfa_size_limit(Some(REGEX_COMPILED_SIZE_LIMIT))
                .utf8(false),
        )
        .build_from_hir(&hir)
        .map(|_| ())
        .map_err(|e| match e.size_limit() {
            Some(_) => invalid("regex compiles too large"),
            None => invalid(&e.to_string()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::re2::re2_program_size_bound;

    fn re2_size(re: &str) -> u64 {
        re2_program_size_bound(re).unwrap()
    }

    #[test]
    fn lower_bounds_stay_under_what_envoy_reports() {
        // Sizes Envoy 1.40 reported for these patterns (see tests/e2e/envoy_validate.rs for the live comparison).
        for (re, envoy) in [
            ("a{97}", 101),
            ("a{100}", 104),
            ("^a{100}", 102),
            (r"\w{33}", 103),
            (r"(a|b)(c|d)a{100}", 110),
            (r"[^\n]a{100}", 106),
            (r"\sa{100}", 107),
            ("[a-z0-9]{50}", 104),
        ] {
            let bound = re2_size(re);
            assert!(bound <= envoy, "{re}: {bound} > {envoy}");
            assert!(bound > ENVOY_RE2_PROGRAM_LIMIT, "{re}: {bound}");
        }
        assert_eq!(re2_size("a{96}"), 100);
        // Open-ended repetitions: n copies and a loop, not n + 1 copies (tests/e2e/envoy_regex.rs has Envoy load them).
        assert!(
            re2_size("(?:abcdefghijklmnopqrstuvwxyz0123456789){2,}") <= ENVOY_RE2_PROGRAM_LIMIT
        );
        assert!(
            re2_size("(?:abcdefghijklmnopqrstuvwxyz0123456789abcdefghijkl)+")
                <= ENVOY_RE2_PROGRAM_LIMIT
        );
        assert!(re2_size(r"^/api/v[0-9]+/.*$") < 20);
    }

    #[test]
    fn verdicts() {
        start_object();
        assert!(check_regex("^/api/v[0-9]+/.*$").is_ok());
        assert!(check_regex("(?i)foo|bar").is_ok());
        assert!(check_regex(r"\p{Greek}+").is_ok());
        let unclosed = check_regex("(unclosed").unwrap_err();
        assert!(unclosed.contains("unclosed group"), "{unclosed}");
        let huge = check_regex(r"\w{300}").unwrap_err();
        assert!(huge.contains("Envoy rejects more than 100"), "{huge}");
        let unicode = check_regex(r"(\pL{100}){100}").unwrap_err();
        assert!(unicode.contains("compiles too large"), "{unicode}");
        assert!(check_regex("(a)\\1").is_err()); // backreferences are not RE2
        assert!(check_regex("(?=x)").is_err()); // lookahead is not RE2
        assert!(check_regex(&"a".repeat(1025)).is_err());
    }

    #[test]
    fn one_object_cannot_compile_without_end() {
        start_object();
        let mut refused = 0;
        for n in 0..400 {
            // Distinct patterns (no cache hits), each a large Unicode class repeated, under every size limit.
            if let Err(e) = check_regex(&format!(r"\pL{{120}}|x{n}")) {
                assert!(e.contains(WORK_EXHAUSTED), "{e}");
                refused += 1;
            }
        }
        assert!(refused > 0);
        start_object();
        assert!(check_regex(r"\pL{120}|y").is_ok());
    }
}
