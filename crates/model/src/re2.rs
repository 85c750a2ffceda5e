//! RE2 programs as Envoy sizes them (pure): takes a regex, yields a lower bound of the RE2 program Envoy compiles for
//! it ([`re2_program_size_bound`]), to compare with Envoy's limit ([`ENVOY_RE2_PROGRAM_LIMIT`]): over it, Envoy
//! rejects the whole resource. Validation (`validate::regex`), the protoc-gen-validate rules of EnvoyFilter patches
//! (`envoy_proto::pgv`) and Istio's peer-identity matches ([`super::peer_identity`]) all ask it.

use regex_automata::util::syntax;
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// Envoy's default limit on the RE2 program size of a regex (runtime `re2.max_program_size.error_level`).
pub const ENVOY_RE2_PROGRAM_LIMIT: u64 = 100;

/// Parser settings that read a pattern as RE2 does: `\w`, `\d`, `\s`, `\b` and case folding are ASCII.
pub fn re2_reading() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

/// The lower bound of [`re2_program_size_at_least`] for a pattern, or `None` when RE2's reading of it does not
/// parse here (Unicode property classes, invalid syntax).
pub fn re2_program_size_bound(re: &str) -> Option<u64> {
    syntax::parse_with(re, &re2_reading())
        .ok()
        .map(|hir| re2_program_size_at_least(&hir))
}

/// A cheap estimate of the Thompson NFA's size: each literal byte and each class range counts one, a repetition
/// multiplies by its maximum (an unbounded one by its minimum plus one).
pub fn nfa_weight(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(literal) => literal.0.len() as u64,
        HirKind::Class(Class::Unicode(class)) => class.ranges().len() as u64,
        HirKind::Class(Class::Bytes(class)) => class.ranges().len() as u64,
        HirKind::Repetition(rep) => {
            let copies = rep.max.unwrap_or(rep.min.saturating_add(1)).max(1);
            nfa_weight(&rep.sub).saturating_mul(u64::from(copies))
        }
        HirKind::Capture(capture) => nfa_weight(&capture.sub).saturating_add(2),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts
            .iter()
            .fold(0u64, |sum, part| sum.saturating_add(nfa_weight(part))),
    }
}

/// A lower bound of the RE2 program size Envoy computes for a pattern parsed as RE2 reads it (bytes, ASCII
/// classes). Each character and each character class takes at least one instruction, a capture group two more,
/// an optional copy in a repetition its body and a branch, an open-ended repetition `x{n,}` n copies and a
/// branch (`x*` its body); an alternation at least its largest branch (RE2 factors common prefixes). The program's frame adds 4 instructions, 2 when the pattern is anchored at its start.
pub fn re2_program_size_at_least(hir: &Hir) -> u64 {
    let anchored = matches!(hir.kind(), HirKind::Concat(parts)
        if parts.first().is_some_and(|first| matches!(first.kind(), HirKind::Look(Look::Start))))
        || matches!(hir.kind(), HirKind::Look(Look::Start));
    instructions(hir).saturating_add(if anchored { 2 } else { 4 })
}

fn instructions(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        // Characters, not bytes: RE2 shares the leading bytes of repeated multi-byte characters.
        HirKind::Literal(literal) => {
            literal.0.iter().filter(|b| (**b & 0xC0) != 0x80).count() as u64
        }
        HirKind::Class(class) => class_instructions(class),
        HirKind::Repetition(rep) => {
            let body = instructions(&rep.sub);
            let min = u64::from(rep.min);
            match rep.max {
                // `x{n,m}` is n copies, then m-n optional ones, each its body behind a branch (one instruction).
                Some(max) => {
                    let max = u64::from(max.max(rep.min));
                    body.saturating_mul(max).saturating_add(max - min)
                }
                // `x*` is one copy in a loop (Envoy 1.40 reports no more for `(?:abc)*`); `x{n,}` is n copies, the
                // last one looping back (one instruction).
                None if min == 0 => body,
                None => body.saturating_mul(min).saturating_add(1),
            }
        }
        HirKind::Capture(capture) => instructions(&capture.sub).saturating_add(2),
        HirKind::Concat(parts) => parts
            .iter()
            .fold(0u64, |sum, part| sum.saturating_add(instructions(part))),
        HirKind::Alternation(parts) => parts.iter().map(instructions).max().unwrap_or(0),
    }
}

/// At least one instruction per byte range; an upper-case ASCII range may share one with its lower-case twin
/// (RE2 folds case), so those are not counted.
fn class_instructions(class: &Class) -> u64 {
    let Class::Bytes(bytes) = class else {
        return 1;
    };
    let ranges = bytes.ranges();
    let upper = ranges
        .iter()
        .filter(|r| r.start().is_ascii_uppercase() && r.end().is_ascii_uppercase())
        .count();
    (ranges.len() - upper).max(1) as u64
}
