//! CEL syntax check: takes an expression string and says whether it parses under the Common Expression Language
//! grammar (as cel-go's parser with default options does, which is what Istio uses for access-log filters).
//! Only syntax is checked: names, functions and types are not resolved.

/// Deepest nesting accepted (cel-go's default recursion limit).
const MAX_DEPTH: usize = 250;
/// Longest expression accepted, in code points (cel-go's default).
const MAX_CODE_POINTS: usize = 100_000;

/// Words that cannot be used as identifiers.
const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Checks that `expr` is a syntactically valid CEL expression; the error names the problem and its offset.
pub fn check_syntax(expr: &str) -> Result<(), String> {
    if expr.chars().count() > MAX_CODE_POINTS {
        return Err(format!(
            "expression is longer than {MAX_CODE_POINTS} characters"
        ));
    }
    let tokens = lex(expr)?;
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        depth: 0,
    };
    parser.expr()?;
    match parser.peek() {
        Tok::Eof => Ok(()),
        other => Err(format!(
            "unexpected {} at offset {}",
            other.describe(),
            parser.offset()
        )),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A literal: number, string, bytes, bool or null.
    Literal,
    /// Punctuation or operator.
    Punct(&'static str),
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("identifier {name:?}"),
            Tok::Literal => "literal".into(),
            Tok::Punct(p) => format!("{p:?}"),
            Tok::Eof => "end of expression".into(),
        }
    }
}

/// Operators and punctuation, longest first so that `<=` wins over `<`.
const PUNCT: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "-", "+", "*", "/", "%", "?", ":", ".", ",",
    "(", ")", "[", "]", "{", "}",
];

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, String> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c') {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(bytes.len(), |n| i + n);
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i = lex_number(src, i)?;
            out.push((Tok::Literal, start));
            continue;
        }
        if c == b'_' || c.is_ascii_alphabetic() {
            let end = src[i..]
                .find(|ch: char| !(ch == '_' || ch.is_ascii_alphanumeric()))
                .map_or(bytes.len(), |n| i + n);
            let word = &src[i..end];
            let quote_follows = matches!(bytes.get(end), Some(b'"' | b'\''));
            let lower = word.to_ascii_lowercase();
            if quote_follows && matches!(lower.as_str(), "r" | "b" | "rb" | "br") {
                let raw = lower.contains('r');
                i = lex_string(src, end, raw)?;
                out.push((Tok::Literal, start));
                continue;
            }
            i = end;
            match word {
                "true" | "false" | "null" => out.push((Tok::Literal, start)),
                "in" => out.push((Tok::Punct("in"), start)),
                _ if RESERVED.contains(&word) => {
                    return Err(format!("reserved word {word:?} at offset {start}"))
                }
                _ => out.push((Tok::Ident(word.to_string()), start)),
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            i = lex_string(src, i, false)?;
            out.push((Tok::Literal, start));
            continue;
        }
        match PUNCT.iter().find(|p| src[i..].starts_with(**p)) {
            Some(p) => {
                i += p.len();
                out.push((Tok::Punct(p), start));
            }
            None => {
                let ch = src[i..].chars().next().unwrap_or_default();
                return Err(format!("unexpected character {ch:?} at offset {i}"));
            }
        }
    }
    out.push((Tok::Eof, src.len()));
    Ok(out)
}

/// Lexes a number starting at `i`; returns the offset after it.
fn lex_number(src: &str, start: usize) -> Result<usize, String> {
    let bytes = src.as_bytes();
    let digits = |from: usize, hex: bool| {
        let mut j = from;
        while bytes
            .get(j)
            .is_some_and(|c| c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()))
        {
            j += 1;
        }
        j
    };
    let bad = || format!("malformed number at offset {start}");
    if src[start..].starts_with("0x") || src[start..].starts_with("0X") {
        let end = digits(start + 2, true);
        if end == start + 2 {
            return Err(bad());
        }
        let value = u64::from_str_radix(&src[start + 2..end], 16).map_err(|_| bad())?;
        return finish_int(bytes, end, value, start);
    }
    let int_end = digits(start, false);
    let mut end = int_end;
    let mut float = false;
    if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits(end + 1, false);
        float = true;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_end = digits(j, false);
        if exp_end == j {
            return Err(bad());
        }
        end = exp_end;
        float = true;
    }
    if float {
        return Ok(end);
    }
    let value: u64 = src[start..int_end].parse().map_err(|_| bad())?;
    finish_int(bytes, int_end, value, start)
}

/// Applies the `u` suffix rules: unsigned literals fit 64 bits; signed ones fit 64 bits with room for negation.
fn finish_int(bytes: &[u8], end: usize, value: u64, start: usize) -> Result<usize, String> {
    if matches!(bytes.get(end), Some(b'u' | b'U')) {
        return Ok(end + 1);
    }
    if value > 1 << 63 {
        return Err(format!("integer literal out of range at offset {start}"));
    }
    Ok(end)
}

/// Lexes a quoted string at `i` (single, double or triple quotes); returns the offset after it.
fn lex_string(src: &str, start: usize, raw: bool) -> Result<usize, String> {
    let rest = &src[start..];
    let quote = &rest[..1];
    let triple = rest.starts_with(&quote.repeat(3));
    let delim = if triple {
        quote.repeat(3)
    } else {
        quote.to_string()
    };
    let mut chars = rest[delim.len()..].char_indices();
    let body_start = start + delim.len();
    while let Some((k, ch)) = chars.next() {
        let at = body_start + k;
        if src[at..].starts_with(&delim) {
            return Ok(at + delim.len());
        }
        match ch {
            '\n' | '\r' if !triple => {
                return Err(format!("unterminated string starting at offset {start}"))
            }
            '\\' if !raw => {
                let Some((_, esc)) = chars.next() else { break };
                let hex_len = match esc {
                    'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '\\' | '\'' | '"' | '`' | '?' => 0,
                    'x' | 'X' => 2,
                    'u' => 4,
                    'U' => 8,
                    '0'..='3' => {
                        for _ in 0..2 {
                            match chars.next() {
                                Some((_, '0'..='7')) => {}
                                _ => return Err(format!("invalid octal escape at offset {at}")),
                            }
                        }
                        continue;
                    }
                    _ => return Err(format!("invalid escape \\{esc} at offset {at}")),
                };
                for _ in 0..hex_len {
                    match chars.next() {
                        Some((_, h)) if h.is_ascii_hexdigit() => {}
                        _ => return Err(format!("invalid escape at offset {at}")),
                    }
                }
            }
            _ => {}
        }
    }
    Err(format!("unterminated string starting at offset {start}"))
}

struct Parser<'a> {
    tokens: &'a [(Tok, usize)],
    pos: usize,
    depth: usize,
}

type Parsed = Result<(), String>;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        self.tokens
            .get(self.pos + ahead)
            .or(self.tokens.last())
            .map_or(&Tok::Eof, |(t, _)| t)
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .map_or(0, |(_, o)| *o)
    }

    fn bump(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Tok::Punct(q) if *q == p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Parsed {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!(
                "expected {p:?} but found {} at offset {}",
                self.peek().describe(),
                self.offset()
            ))
        }
    }

    fn is_punct(&self, options: &[&str]) -> bool {
        matches!(self.peek(), Tok::Punct(q) if options.contains(q))
    }

    fn expr(&mut self) -> Parsed {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("expression nests deeper than {MAX_DEPTH} levels"));
        }
        self.binary(0)?;
        if self.eat("?") {
            self.binary(0)?;
            self.expect(":")?;
            self.expr()?;
        }
        self.depth -= 1;
        Ok(())
    }

    /// Binary operators by precedence level, loosest first.
    fn binary(&mut self, level: usize) -> Parsed {
        const LEVELS: [&[&str]; 5] = [
            &["||"],
            &["&&"],
            &["<", "<=", ">", ">=", "==", "!=", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        self.binary(level + 1)?;
        while self.is_punct(ops) {
            self.bump();
            self.binary(level + 1)?;
        }
        Ok(())
    }

    fn unary(&mut self) -> Parsed {
        while self.is_punct(&["!", "-"]) {
            self.bump();
        }
        self.member()
    }

    fn member(&mut self) -> Parsed {
        self.primary()?;
        loop {
            if self.eat(".") {
                if self.is_punct(&["?"]) {
                    return Err(format!(
                        "optional field selection is not supported (offset {})",
                        self.offset()
                    ));
                }
                self.ident()?;
                if self.eat("(") {
                    self.list_until(")")?;
                }
            } else if self.eat("[") {
                if self.is_punct(&["?"]) {
                    return Err(format!(
                        "optional index is not supported (offset {})",
                        self.offset()
                    ));
                }
                self.expr()?;
                self.expect("]")?;
            } else {
                return Ok(());
            }
        }
    }

    fn ident(&mut self) -> Parsed {
        if let Tok::Ident(_) = self.peek() {
            self.bump();
            Ok(())
        } else {
            Err(format!(
                "expected an identifier but found {} at offset {}",
                self.peek().describe(),
                self.offset()
            ))
        }
    }

    fn primary(&mut self) -> Parsed {
        match self.peek().clone() {
            Tok::Literal => {
                self.bump();
                Ok(())
            }
            Tok::Punct("(") => {
                self.bump();
                self.expr()?;
                self.expect(")")
            }
            Tok::Punct("[") => {
                self.bump();
                self.list_until("]")
            }
            Tok::Punct("{") => {
                self.bump();
                self.entries_until(false)
            }
            Tok::Punct(".") | Tok::Ident(_) => {
                self.eat(".");
                self.ident()?;
                if self.eat("(") {
                    return self.list_until(")");
                }
                // `a.b.C{field: value}` builds a message: qualified name, then `{`.
                let mut k = 0;
                while matches!(self.peek_at(k), Tok::Punct("."))
                    && matches!(self.peek_at(k + 1), Tok::Ident(_))
                {
                    k += 2;
                }
                if matches!(self.peek_at(k), Tok::Punct("{")) {
                    for _ in 0..=k {
                        self.bump();
                    }
                    return self.entries_until(true);
                }
                Ok(())
            }
            other => Err(format!(
                "unexpected {} at offset {}",
                other.describe(),
                self.offset()
            )),
        }
    }

    /// Parses `expr, expr, … [,] close` (the opening token is consumed).
    fn list_until(&mut self, close: &str) -> Parsed {
        if self.eat(close) {
            return Ok(());
        }
        loop {
            self.expr()?;
            if self.eat(close) {
                return Ok(());
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok(());
            }
        }
    }

    /// Parses map entries `key: value` or, for messages, field inits `name: value`, up to `}`.
    fn entries_until(&mut self, fields: bool) -> Parsed {
        if self.eat("}") {
            return Ok(());
        }
        loop {
            if fields {
                self.ident()?;
            } else {
                self.expr()?;
            }
            self.expect(":")?;
            self.expr()?;
            if self.eat("}") {
                return Ok(());
            }
            self.expect(",")?;
            if self.eat("}") {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_syntax;
    use proptest::prelude::*;

    proptest! {
        // Arbitrary text, and text built from CEL's own tokens, never panics the checker.
        #[test]
        fn never_panics_on_any_text(s in "\\PC{0,64}") {
            let _ = check_syntax(&s);
        }

        #[test]
        fn never_panics_on_token_soup(s in r#"([a-z0-9_.'"()\[\]{}:,?!<>=&|+*/%\\ -]|é|r'|b"|'''|0x|1e){0,48}"#) {
            let _ = check_syntax(&s);
        }
    }

    #[test]
    fn accepts_valid_expressions() {
        for e in [
            "true",
            "response.code >= 400",
            "request.path == '/filter-test'",
            "response.code >= 400 || (request.headers['x'] == \"y\" && !connection.mtls)",
            "a ? b : c ? d : e",
            "size(request.headers) > 0u && 1.5e3 > .5 && 0x1F == 31",
            "request.url_path.startsWith('/api') && request.method in ['GET', 'POST',]",
            "{'a': 1, 'b': [1, 2]}['a'] == -1",
            "google.protobuf.Int64Value{value: 1} != null",
            "r'raw\\d' + b\"bytes\" + '''multi\nline''' + \"\\x41\\u00e9\\101\"",
            "a.b.c(1, 2).d[0] // trailing comment",
            "-9223372036854775808 < 0",
            "--1 == 1 && !!true",
        ] {
            assert_eq!(check_syntax(e), Ok(()), "{e}");
        }
    }

    #[test]
    fn rejects_invalid_expressions() {
        for e in [
            "",
            "response.code >=",
            "a = b",
            "a & b",
            "(a",
            "[1, 2",
            "a ? b",
            "'unterminated",
            "'bad escape \\q'",
            "if == 1",
            "a.?b",
            "a.1",
            "99999999999999999999",
            "a b",
            "{1: }",
            "#",
        ] {
            assert!(check_syntax(e).is_err(), "{e}");
        }
    }

    #[test]
    fn limits_nesting() {
        let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        assert!(check_syntax(&deep).is_err());
        let ok = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert_eq!(check_syntax(&ok), Ok(()));
    }
}
