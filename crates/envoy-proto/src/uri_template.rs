//! Envoy's URI template grammar (pure): takes a `path_template` of `envoy.path.match.uri_template` and yields
//! whether Envoy accepts it, or why not. Mirrors `parseURLPatternSyntax` in Envoy's
//! `source/extensions/path/uri_template_lib/uri_template_internal.cc`: a `/` then printable ASCII; `/`-separated
//! segments, each `*`, `**`, a `{name}` or `{name=…}` variable, or a literal of RFC 3986 path characters (no `*`,
//! no `=`); an operator or variable may be followed by a literal suffix ending the template; no glob after `**`;
//! at most 5 variables, with distinct names of 1 to 16 characters. Envoy throws on anything else while loading
//! the config, which takes the whole process down, so a template must pass this before it is sent.

/// Characters of a literal: unreserved, `%`, sub-delims without `*` and `=`, `:` and `@` (Envoy's `kLiteral`).
fn is_literal(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~%!$&'()+,;:@".contains(&c))
}

/// Envoy's `isValidVariableName`: a letter, then letters, digits and `_`.
fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|c| c.is_ascii_alphabetic())
        && bytes.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// What one segment of the template is, for the "no glob after `**`" rule.
enum Parsed {
    /// `*` (false) or `**` (true).
    Operator(bool),
    /// A variable: the globs of its match, `true` for `**` (an empty match is one `*`).
    Variable(Vec<bool>),
    Literal,
}

/// Consumes an operator at the start of `rest` (which starts with `*`).
fn operator(rest: &str) -> (bool, &str) {
    match rest.strip_prefix("**") {
        Some(after) => (true, after),
        None => (false, &rest[1..]),
    }
}

/// Consumes a literal up to the next `/`.
fn literal(rest: &str) -> Result<&str, String> {
    let end = rest.find('/').unwrap_or(rest.len());
    if is_literal(&rest[..end]) {
        Ok(&rest[end..])
    } else {
        Err(format!("invalid literal {:?}", &rest[..end]))
    }
}

/// Consumes a variable `{name}` or `{name=match}` at the start of `rest`; returns its name and globs.
fn variable(rest: &str) -> Result<(&str, Vec<bool>, &str), String> {
    let inner = rest.get(1..).unwrap_or_default();
    if rest.len() < 2 {
        return Err("invalid variable".into());
    }
    let Some((body, after)) = inner.split_once('}') else {
        return Err("unmatched variable bracket".into());
    };
    let (name, pattern) = match body.split_once('=') {
        Some((name, pattern)) => (name, Some(pattern)),
        None => (body, None),
    };
    if !is_variable_name(name) {
        return Err(format!("invalid variable name {name:?}"));
    }
    let mut globs = Vec::new();
    let Some(mut pattern) = pattern else {
        return Ok((name, globs, after));
    };
    if pattern.is_empty() {
        return Err("empty variable match".into());
    }
    while !pattern.is_empty() {
        if pattern.starts_with('*') {
            let (text_glob, left) = operator(pattern);
            globs.push(text_glob);
            pattern = left;
        } else {
            pattern = literal(pattern)?;
        }
        if !pattern.is_empty() {
            match pattern.strip_prefix('/') {
                Some(left) if !left.is_empty() => pattern = left,
                _ => return Err("invalid variable match".into()),
            }
        }
    }
    Ok((name, globs, after))
}

/// Checks a URI template as Envoy parses it; the error says what Envoy would refuse.
pub fn check(template: &str) -> Result<(), String> {
    let Some(mut rest) = template.strip_prefix('/') else {
        return Err("a URI template must start with '/'".into());
    };
    if !rest.bytes().all(|c| c.is_ascii_graphic()) {
        return Err("a URI template may hold only printable ASCII without spaces".into());
    }
    let mut segments = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    while !rest.is_empty() {
        let segment = if rest.starts_with('*') {
            let (text_glob, left) = operator(rest);
            rest = left;
            Parsed::Operator(text_glob)
        } else if rest.starts_with('{') {
            let (name, globs, left) = variable(rest)?;
            if names.len() >= 5 {
                return Err("more than 5 variables".into());
            }
            if name.len() > 16 {
                return Err(format!(
                    "variable name {name:?} is longer than 16 characters"
                ));
            }
            if names.contains(&name) {
                return Err(format!("variable {name:?} is repeated"));
            }
            names.push(name);
            rest = left;
            Parsed::Variable(globs)
        } else {
            rest = literal(rest)?;
            Parsed::Literal
        };
        segments.push(segment);
        if rest.is_empty() || rest == "/" {
            break;
        }
        match rest.strip_prefix('/') {
            Some(left) => rest = left,
            None => {
                // A suffix: a literal ending the template.
                if !literal(rest)?.is_empty() {
                    return Err("a suffix may not hold '/' (prefix match is not supported)".into());
                }
                break;
            }
        }
    }
    let mut seen_text_glob = false;
    for segment in segments {
        let globs = match segment {
            Parsed::Operator(text_glob) => vec![text_glob],
            Parsed::Variable(globs) if globs.is_empty() => vec![false],
            Parsed::Variable(globs) => globs,
            Parsed::Literal => continue,
        };
        for text_glob in globs {
            if seen_text_glob {
                return Err("no glob may follow '**'".into());
            }
            seen_text_glob = text_glob;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_envoy_parses() {
        for ok in [
            "/",
            "/a",
            "/a/",
            "/*",
            "/**",
            "/a/*/b/**",
            "/**/a",
            "/*.txt",
            "/a/**.json",
            "/{x}/{y=*}/{z=a/**}",
            "/a%20b/*",
            "/a:b@c/*/",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_what_envoy_throws_on() {
        for bad in [
            "",
            "a/*",
            "//*",
            "/*//",
            "/a b/*",
            "/a=b/*",
            "/a*/*",
            "/{**}",
            "/{*}",
            "/**/*",
            "/**/{x}",
            "/{x=**}/*",
            "/*.a/b",
            "/é/*",
            "/{x}/{x}",
            "/{a}/{b}/{c}/{d}/{e}/{f}",
            "/{abcdefghijklmnopq}",
            "/{x=}",
            "/{x=a/}",
            "/{x",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
