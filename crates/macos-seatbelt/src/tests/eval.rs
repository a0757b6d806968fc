//! A small SBPL reader and evaluator for the subset paddock writes, so that properties can
//! ask "is this read allowed?" of a generated profile, with last-match-wins semantics.
//!
//! It is strict where the real one would fail to compile: unbalanced parentheses, a string
//! left open or holding a backslash, a parameter referenced but not passed. It also refuses
//! a parameter passed but never referenced (dead data in argv hides mistakes).

use std::collections::{BTreeSet, HashMap};

use crate::Profile;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Sexp {
    List(Vec<Sexp>),
    Sym(String),
    Str(String),
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub allow: bool,
    pub ops: Vec<String>,
    pub filters: Vec<Sexp>,
    /// The rule's index among all rules, for order checks.
    pub index: usize,
    /// The rule as text, for messages.
    pub text: String,
}

#[derive(Debug)]
pub(crate) struct Sbpl {
    pub rules: Vec<Rule>,
    params: HashMap<String, String>,
}

fn tokenize(text: &str) -> Result<Vec<Sexp>, String> {
    // Returns the top-level forms.
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '(' => {
                stack.push(Vec::new());
                i += 1;
            }
            ')' => {
                let list = stack.pop().ok_or("unbalanced `)`")?;
                stack.last_mut().ok_or("unbalanced `)`")?.push(Sexp::List(list));
                i += 1;
            }
            '"' | '#' => {
                if c == '#' {
                    if chars.get(i + 1) == Some(&'|') {
                        return Err("block comment `#|` in a profile".to_owned());
                    }
                    if chars.get(i + 1) != Some(&'"') {
                        return Err(format!("stray `#` at {i}"));
                    }
                    i += 1;
                }
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j] != '"' {
                    if chars[j] == '\\' && c == '"' {
                        return Err("backslash in a string".to_owned());
                    }
                    if chars[j] == '\n' {
                        return Err("newline in a string".to_owned());
                    }
                    j += 1;
                }
                if j == chars.len() {
                    return Err("unterminated string".to_owned());
                }
                let s: String = chars[start..j].iter().collect();
                stack.last_mut().ok_or("no list")?.push(Sexp::Str(s));
                i = j + 1;
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() && !"()\";".contains(chars[i]) {
                    i += 1;
                }
                let s: String = chars[start..i].iter().collect();
                stack.last_mut().ok_or("no list")?.push(Sexp::Sym(s));
            }
        }
    }
    if stack.len() != 1 {
        return Err("unbalanced `(`".to_owned());
    }
    Ok(stack.pop().unwrap_or_default())
}

fn head(list: &[Sexp]) -> Option<&str> {
    match list.first() {
        Some(Sexp::Sym(s)) => Some(s),
        _ => None,
    }
}

fn collect_params(e: &Sexp, out: &mut BTreeSet<String>) {
    if let Sexp::List(items) = e {
        if head(items) == Some("param")
            && let Some(Sexp::Str(name)) = items.get(1)
        {
            out.insert(name.clone());
        }
        for item in items {
            collect_params(item, out);
        }
    }
}

impl Sbpl {
    pub fn parse(profile: &Profile) -> Result<Sbpl, String> {
        let forms = tokenize(&profile.text)?;
        let params: HashMap<String, String> = profile
            .params
            .iter()
            .map(|p| (p.name.clone(), p.value.to_string_lossy().into_owned()))
            .collect();
        if params.len() != profile.params.len() {
            return Err("a parameter name is used twice".to_owned());
        }
        let mut referenced = BTreeSet::new();
        let mut rules = Vec::new();
        let mut first = true;
        for form in &forms {
            let Sexp::List(items) = form else { return Err(format!("top-level atom {form:?}")) };
            collect_params(form, &mut referenced);
            match head(items) {
                Some("version") if first => {}
                Some(verb @ ("allow" | "deny")) => {
                    let mut ops = Vec::new();
                    let mut filters = Vec::new();
                    for item in &items[1..] {
                        match item {
                            Sexp::Sym(op) if filters.is_empty() => ops.push(op.clone()),
                            Sexp::List(l) if head(l) == Some("with") => {}
                            Sexp::List(_) => filters.push(item.clone()),
                            other => return Err(format!("unexpected {other:?} in a rule")),
                        }
                    }
                    if ops.is_empty() {
                        return Err("a rule without an operation".to_owned());
                    }
                    let index = rules.len();
                    rules.push(Rule {
                        allow: verb == "allow",
                        ops,
                        filters,
                        index,
                        text: show(form),
                    });
                }
                other => return Err(format!("unexpected form {other:?}")),
            }
            first = false;
        }
        let passed: BTreeSet<String> = params.keys().cloned().collect();
        if let Some(missing) = referenced.difference(&passed).next() {
            return Err(format!("parameter {missing} is referenced but not passed"));
        }
        if let Some(unused) = passed.difference(&referenced).next() {
            return Err(format!("parameter {unused} is passed but never referenced"));
        }
        match rules.first() {
            Some(r) if !r.allow && r.ops == ["default"] => {}
            _ => return Err("the first rule is not (deny default)".to_owned()),
        }
        Ok(Sbpl { rules, params })
    }

    fn arg(&self, e: &Sexp) -> String {
        match e {
            Sexp::Str(s) => s.clone(),
            Sexp::List(l) if head(l) == Some("param") => match l.get(1) {
                Some(Sexp::Str(name)) => self.params[name].clone(),
                _ => panic!("bad param form"),
            },
            other => panic!("unexpected argument {other:?}"),
        }
    }

    /// Whether a filter matches `subject` (a path, a service name or an address).
    fn matches(&self, f: &Sexp, subject: &str) -> bool {
        let Sexp::List(l) = f else { panic!("filter {f:?}") };
        let args = &l[1..];
        match head(l) {
            Some("literal" | "path-literal") => self.arg(&args[0]) == subject,
            Some("subpath") => {
                let p = self.arg(&args[0]);
                p == "/" || subject == p || subject.starts_with(&format!("{p}/"))
            }
            Some("regex" | "path-regex") => {
                regex::Regex::new(&self.arg(&args[0])).expect("profile regex").is_match(subject)
            }
            Some("require-all") => args.iter().all(|a| self.matches(a, subject)),
            Some("require-any") => args.iter().any(|a| self.matches(a, subject)),
            Some("require-not") => !self.matches(&args[0], subject),
            Some("global-name") => self.arg(&args[0]) == subject,
            Some("global-name-prefix") => subject.starts_with(&self.arg(&args[0])),
            Some("remote" | "local") => match (&args[0], args.get(1)) {
                (Sexp::Sym(kind), Some(Sexp::Str(addr))) if kind == "ip" => {
                    // `HOST:PORT`, either part `*` (any); SBPL has no other wildcards here.
                    let split =
                        |a: &str| a.rsplit_once(':').map(|(h, p)| (h.to_owned(), p.to_owned()));
                    match (split(addr), split(subject)) {
                        (Some((rh, rp)), Some((sh, sp))) => {
                            (rh == "*" || rh == sh) && (rp == "*" || rp == sp)
                        }
                        _ => addr == subject,
                    }
                }
                (Sexp::Sym(kind), Some(inner)) if kind == "unix-socket" => {
                    self.matches(inner, subject)
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The verdict for `op` on `subject`: the last rule whose operation and filters match.
    pub fn allows(&self, op: &str, subject: &str) -> bool {
        self.deciding_rule(op, subject).is_some_and(|r| r.allow)
    }

    pub fn deciding_rule(&self, op: &str, subject: &str) -> Option<&Rule> {
        self.rules.iter().rev().find(|r| {
            r.ops.iter().any(|o| op_matches(o, op))
                && (r.filters.is_empty() || r.filters.iter().any(|f| self.matches(f, subject)))
        })
    }
}

fn op_matches(rule_op: &str, op: &str) -> bool {
    rule_op == "default"
        || rule_op == op
        || rule_op.strip_suffix('*').is_some_and(|stem| op.starts_with(stem))
}

fn show(e: &Sexp) -> String {
    match e {
        Sexp::Sym(s) => s.clone(),
        Sexp::Str(s) => format!("{s:?}"),
        Sexp::List(l) => format!("({})", l.iter().map(show).collect::<Vec<_>>().join(" ")),
    }
}

#[cfg(test)]
mod self_tests {
    use super::*;
    use crate::params::Param;

    fn profile(text: &str, params: &[(&str, &str)]) -> Profile {
        Profile {
            text: text.to_owned(),
            params: params
                .iter()
                .map(|(n, v)| Param { name: (*n).into(), value: (*v).into() })
                .collect(),
        }
    }

    #[test]
    fn last_match_wins_and_filters_compose() {
        let p = profile(
            "(version 1)(deny default)(allow file-read*)\n\
             (deny file-read* (require-all (subpath (param \"A\")) (require-not (literal (param \"E\")))))",
            &[("A", "/h"), ("E", "/h/ok")],
        );
        let s = Sbpl::parse(&p).unwrap();
        assert!(s.allows("file-read-data", "/etc/passwd"));
        assert!(!s.allows("file-read-data", "/h/x"));
        assert!(s.allows("file-read-data", "/h/ok"));
        assert!(!s.allows("file-write-data", "/etc/passwd"));
    }

    #[test]
    fn malformed_profiles_are_rejected() {
        let cases = [
            ("(version 1)(deny default)(allow file-read*", "unbalanced"),
            ("(version 1)(deny default)(allow file-read* (literal \"a\\\"\"))", "backslash"),
            ("(version 1)(deny default)#|x|#", "block comment"),
            ("(version 1)(deny default)(allow file-read* (literal (param \"X\")))", "not passed"),
            ("(version 1)(allow default)", "first rule"),
        ];
        for (text, want) in cases {
            let err = Sbpl::parse(&profile(text, &[])).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        let err = Sbpl::parse(&profile("(version 1)(deny default)", &[("U", "/x")])).unwrap_err();
        assert!(err.contains("never referenced"), "{err}");
    }
}
