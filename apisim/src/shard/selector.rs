//! The `shardSelector` expression: parsed once into a typed [`ShardSelector`], matched against
//! objects, and printed back in its canonical form (what `ListMeta.shardInfo.selector` echoes).
//!
//! The grammar is the CEL subset the apiserver accepts: one or more
//! `shardRange(FIELD, 'HEXSTART', 'HEXEND')` calls joined by `||` (parentheses allowed), where
//! FIELD is `object.metadata.uid` or `object.metadata.namespace` (the same in every range), and
//! each bound is a quoted string of `0x` and exactly 16 lowercase hex digits, or
//! `'0x10000000000000000'` (2^64, the end of the hash space), with start < end. Any other CEL
//! (`&&`, comparisons, other functions, integer literals) is refused with the apiserver's reason.
//!
//! Invariant: [`ShardSelector::parse`] accepts exactly that grammar and nothing else, never
//! panics on any input, and `parse(s.to_string()) == s` for every selector `s` it returns.

use std::fmt;

use super::fnv::fnv1a_64;

/// The exclusive end of the hash space, 2^64.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// Parentheses and operators nested deeper than this are refused (hostile input).
const MAX_DEPTH: usize = 64;

/// The object field a selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (empty for cluster-scoped objects).
    Namespace,
}

impl ShardField {
    /// The CEL field path, as written in a selector.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    fn from_path(path: &str) -> Option<ShardField> {
        match path {
            "object.metadata.uid" => Some(ShardField::Uid),
            "object.metadata.namespace" => Some(ShardField::Namespace),
            _ => None,
        }
    }
}

/// One half-open range `[start, end)` of the 64-bit hash space; `end` may be 2^64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardRange {
    start: u64,
    end: u128,
}

impl ShardRange {
    /// `[start, end)`; None unless `start < end <= 2^64`.
    pub fn new(start: u64, end: u128) -> Option<ShardRange> {
        (u128::from(start) < end && end <= HASH_SPACE_END).then_some(ShardRange { start, end })
    }

    /// The whole hash space, `[0, 2^64)`.
    pub fn full() -> ShardRange {
        ShardRange {
            start: 0,
            end: HASH_SPACE_END,
        }
    }

    /// The inclusive start.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The exclusive end (at most 2^64).
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` lies in `[start, end)`.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }
}

/// A parsed `shardSelector`: a field and the ranges (ORed) its hash must fall in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    ranges: Vec<ShardRange>,
}

/// Why a `shardSelector` was refused; the text is the apiserver's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShardSelectorError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ShardSelectorError> {
    Err(ShardSelectorError(msg.into()))
}

impl ShardSelector {
    /// A selector over `field` matching any of `ranges`; None when `ranges` is empty.
    pub fn new(field: ShardField, ranges: Vec<ShardRange>) -> Option<ShardSelector> {
        (!ranges.is_empty()).then_some(ShardSelector { field, ranges })
    }

    /// Parses the value of the `shardSelector` query parameter.
    pub fn parse(expr: &str) -> Result<ShardSelector, ShardSelectorError> {
        let expr = expr.trim();
        if expr.is_empty() {
            return err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            );
        }
        let tokens = lex(expr)?;
        let mut p = Parser {
            tokens: &tokens,
            pos: 0,
            depth: 0,
        };
        let ast = p.expr()?;
        if let Some(t) = p.peek() {
            return syntax(format!(
                "unexpected {} at column {}",
                t.kind.describe(),
                t.col
            ));
        }
        let mut ranges = Vec::new();
        let mut field: Option<ShardField> = None;
        collect(&ast, &mut field, &mut ranges)?;
        let field = field.expect("at least one shardRange was collected");
        Ok(ShardSelector { field, ranges })
    }

    /// The hashed field.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order written.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// The hash this selector computes for an object with `uid` and `namespace`.
    pub fn hash_of(&self, uid: &str, namespace: &str) -> u64 {
        fnv1a_64(match self.field {
            ShardField::Uid => uid.as_bytes(),
            ShardField::Namespace => namespace.as_bytes(),
        })
    }

    /// Whether an object with `uid` and `namespace` is in this shard.
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        let h = self.hash_of(uid, namespace);
        self.ranges.iter().any(|r| r.contains(h))
    }
}

/// The canonical form: `shardRange(FIELD, '0x…', '0x…')` joined by ` || `.
impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            // 2^64 prints as its 17 digits, 0x10000000000000000.
            write!(
                f,
                "shardRange({}, '0x{:016x}', '0x{:016x}')",
                self.field.path(),
                r.start,
                r.end
            )?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ShardSelector {
    type Err = ShardSelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ShardSelector::parse(s)
    }
}

fn syntax<T>(msg: impl fmt::Display) -> Result<T, ShardSelectorError> {
    err(format!("CEL parse error: Syntax error: {msg}"))
}

// ---- lexer ----------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// A number literal, by its CEL type (`int64`, `uint64`, `double`).
    Num(&'static str),
    Op(&'static str),
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier {s:?}"),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::Num(t) => format!("{t} literal"),
            Tok::Op(o) => format!("'{o}'"),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Tok,
    /// 1-based column of the token's first character.
    col: usize,
}

const OPS: [&str; 22] = [
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", "(", ")",
    ",", ".", "[", "]",
];

fn lex(s: &str) -> Result<Vec<Token>, ShardSelectorError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(Token {
                kind: Tok::Ident(word),
                col,
            });
        } else if c == '\'' || c == '"' {
            let quote = c;
            i += 1;
            let mut text = String::new();
            loop {
                match chars.get(i) {
                    None => return syntax(format!("unterminated string starting at column {col}")),
                    Some(&ch) if ch == quote => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        // Escapes are kept verbatim: a bound never needs one, so any escape
                        // makes the bound fail the hex check with the character named.
                        text.push('\\');
                        if let Some(&n) = chars.get(i + 1) {
                            text.push(n);
                        }
                        i += 2;
                    }
                    Some(&ch) => {
                        text.push(ch);
                        i += 1;
                    }
                }
            }
            out.push(Token {
                kind: Tok::Str(text),
                col,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            let mut ty = "int64";
            if c == '0' && matches!(chars.get(i + 1), Some('x') | Some('X')) {
                i += 2;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                if chars.get(i) == Some(&'.')
                    && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())
                {
                    ty = "double";
                    i += 1;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            if ty == "int64" && matches!(chars.get(i), Some('u') | Some('U')) {
                ty = "uint64";
                i += 1;
            }
            if chars
                .get(i)
                .is_some_and(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
            {
                let bad: String = chars[start..=i].iter().collect();
                return syntax(format!("malformed number {bad:?} at column {col}"));
            }
            out.push(Token {
                kind: Tok::Num(ty),
                col,
            });
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
                return syntax(format!("unexpected character {c:?} at column {col}"));
            };
            i += op.chars().count();
            out.push(Token {
                kind: Tok::Op(op),
                col,
            });
        }
    }
    Ok(out)
}

// ---- parser: the CEL expression grammar, enough to name what is refused ------------------

#[derive(Debug, Clone)]
enum Expr {
    Ident(String),
    Select(Box<Expr>, String),
    Str(String),
    Num(&'static str),
    List,
    /// A function call or an operator (`_||_`, `_&&_`, `_<_`, `!_`, `-_`, `_[_]`, `_?_:_`).
    Call {
        name: String,
        args: Vec<Expr>,
    },
    /// A call on a receiver, `x.f(args)`.
    Method {
        name: String,
    },
}

impl Expr {
    fn kind(&self) -> &'static str {
        match self {
            Expr::Ident(_) => "identifier",
            Expr::Select(..) => "field selection",
            Expr::Str(_) | Expr::Num(_) => "literal",
            Expr::List => "list",
            Expr::Call { .. } | Expr::Method { .. } => "call",
        }
    }
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek().map(|t| &t.kind) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), ShardSelectorError> {
        if self.eat(op) {
            return Ok(());
        }
        match self.peek() {
            Some(t) => syntax(format!(
                "expected '{op}' at column {}, got {}",
                t.col,
                t.kind.describe()
            )),
            None => syntax(format!("expected '{op}', got end of input")),
        }
    }

    fn enter(&mut self) -> Result<(), ShardSelectorError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return syntax(format!("expression nests deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ShardSelectorError> {
        self.enter()?;
        let cond = self.binary(0)?;
        let e = if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            Expr::Call {
                name: "_?_:_".into(),
                args: vec![cond, a, b],
            }
        } else {
            cond
        };
        self.depth -= 1;
        Ok(e)
    }

    /// Binary operators by CEL precedence: `||`, `&&`, relations, `+ -`, `* / %`.
    fn binary(&mut self, level: usize) -> Result<Expr, ShardSelectorError> {
        const LEVELS: [&[&str]; 5] = [
            &["||"],
            &["&&"],
            &["==", "!=", "<", "<=", ">", ">="],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(op) = self.peek_op().filter(|o| LEVELS[level].contains(o)) {
            self.pos += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Call {
                name: format!("_{op}_"),
                args: vec![left, right],
            };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ShardSelectorError> {
        if let Some(op) = self.peek_op().filter(|o| *o == "!" || *o == "-") {
            self.pos += 1;
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Call {
                name: format!("{op}_"),
                args: vec![inner],
            });
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, ShardSelectorError> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let name = match self.peek().map(|t| t.kind.clone()) {
                    Some(Tok::Ident(n)) => {
                        self.pos += 1;
                        n
                    }
                    Some(k) => {
                        return syntax(format!(
                            "expected a field name after '.' at column {}, got {}",
                            self.tokens[self.pos].col,
                            k.describe()
                        ))
                    }
                    None => return syntax("expected a field name after '.', got end of input"),
                };
                if self.eat("(") {
                    self.args()?;
                    e = Expr::Method { name };
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = Expr::Call {
                    name: "_[_]".into(),
                    args: vec![e, idx],
                };
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self) -> Result<Vec<Expr>, ShardSelectorError> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }

    fn primary(&mut self) -> Result<Expr, ShardSelectorError> {
        let Some(t) = self.peek().cloned() else {
            return syntax("unexpected end of input");
        };
        self.pos += 1;
        match t.kind {
            Tok::Ident(name) => {
                if self.eat("(") {
                    let args = self.args()?;
                    Ok(Expr::Call { name, args })
                } else {
                    Ok(Expr::Ident(name))
                }
            }
            Tok::Str(s) => Ok(Expr::Str(s)),
            Tok::Num(ty) => Ok(Expr::Num(ty)),
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op("[") => {
                if !self.eat("]") {
                    loop {
                        self.expr()?;
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::List)
            }
            other => syntax(format!(
                "unexpected {} at column {}",
                other.describe(),
                t.col
            )),
        }
    }
}

// ---- from the expression to ranges --------------------------------------------------------

fn collect(
    e: &Expr,
    field: &mut Option<ShardField>,
    out: &mut Vec<ShardRange>,
) -> Result<(), ShardSelectorError> {
    match e {
        Expr::Call { name, args } if name == "_||_" => {
            collect(&args[0], field, out)?;
            collect(&args[1], field, out)
        }
        Expr::Call { name, args } if name == "shardRange" => {
            let (f, r) = shard_range(args)?;
            match field {
                Some(prev) if *prev != f => err(format!(
                    "all shard ranges must use the same field, got {:?} and {:?}",
                    prev.path(),
                    f.path()
                )),
                _ => {
                    *field = Some(f);
                    out.push(r);
                    Ok(())
                }
            }
        }
        Expr::Call { name, .. } => err(format!(
            "unsupported function {name:?}; only shardRange() and || are allowed"
        )),
        // CEL would accept `x.shardRange(...)` as a call with a target; the KEP's syntax has
        // none, so a method call is refused whatever its name.
        Expr::Method { name } => err(format!(
            "unsupported method call .{name}(); only shardRange() and || are allowed"
        )),
        other => err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            other.kind()
        )),
    }
}

fn shard_range(args: &[Expr]) -> Result<(ShardField, ShardRange), ShardSelectorError> {
    if args.len() != 3 {
        return err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    }
    let path = field_path(&args[0])
        .map_err(|e| ShardSelectorError(format!("shardRange() first argument: {}", e.0)))?;
    let Some(field) = ShardField::from_path(&path) else {
        return err(format!(
            "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
        ));
    };
    let start = hex_bound(&args[1], "hexStart")?;
    let end = hex_bound(&args[2], "hexEnd")?;
    if start >= end {
        return err(format!(
            "shard range start 0x{start:016x} must be less than end 0x{end:016x}"
        ));
    }
    let start = u64::try_from(start).expect("start < end <= 2^64");
    Ok((field, ShardRange { start, end }))
}

fn field_path(e: &Expr) -> Result<String, ShardSelectorError> {
    match e {
        Expr::Ident(n) => Ok(n.clone()),
        Expr::Select(inner, f) => Ok(format!("{}.{f}", field_path(inner)?)),
        other => err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

/// A bound: a string literal `0x` + 16 lowercase hex digits, or `0x10000000000000000`.
fn hex_bound(e: &Expr, name: &str) -> Result<u128, ShardSelectorError> {
    let s = match e {
        Expr::Str(s) => s,
        Expr::Num(ty) => return err(format!("{name} must be a string literal, got {ty}")),
        other => {
            return err(format!(
                "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
                other.kind()
            ))
        }
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return err(format!("{name} must have '0x' prefix, got {s:?}"));
    };
    if hex.is_empty() {
        return err(format!("{name}: hex value is required after '0x'"));
    }
    let digits = hex.chars().count();
    if digits > 17 {
        return err(format!(
            "{name}: hex value too long ({digits} chars, max 17): {hex:?}"
        ));
    }
    if let Some(c) = hex
        .chars()
        .find(|c| !(c.is_ascii_digit() || ('a'..='f').contains(c)))
    {
        return err(format!(
            "{name}: invalid hex character {:?} in {s:?}",
            c.to_string()
        ));
    }
    if digits == 17 {
        if hex != "10000000000000000" {
            return err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
            ));
        }
        return Ok(HASH_SPACE_END);
    }
    if digits != 16 {
        return err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean \"0x{hex:0>16}\"?)"
        ));
    }
    Ok(u128::from_str_radix(hex, 16).expect("16 lowercase hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> String {
        ShardSelector::parse(s).unwrap_err().0
    }

    #[test]
    fn parses_one_range_and_prints_it_back() {
        let s = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        let sel = ShardSelector::parse(s).unwrap();
        assert_eq!(sel.field(), ShardField::Uid);
        assert_eq!(sel.ranges(), &[ShardRange::new(0, 1 << 63).unwrap()]);
        assert_eq!(sel.to_string(), s);
    }

    #[test]
    fn ors_ranges_and_accepts_the_end_of_the_space() {
        let s = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || (shardRange(object.metadata.namespace,\"0xc000000000000000\",'0x10000000000000000'))";
        let sel = ShardSelector::parse(s).unwrap();
        assert_eq!(sel.field(), ShardField::Namespace);
        assert_eq!(sel.ranges().len(), 2);
        assert_eq!(sel.ranges()[1].end(), HASH_SPACE_END);
        assert_eq!(
            sel.to_string(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
        );
        assert_eq!(ShardSelector::parse(&sel.to_string()).unwrap(), sel);
    }

    #[test]
    fn refuses_what_the_apiserver_refuses_with_its_reason() {
        let cases = [
            ("   ", "empty shard selector is not allowed"),
            ("shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')", "hexStart must have '0x' prefix"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')", "hexEnd must have '0x' prefix"),
            ("shardRange(object.metadata.uid, '0x', '0x8000000000000000')", "hexStart: hex value is required after '0x'"),
            ("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')", "unsupported field path \"object.metadata.name\""),
            ("invalidFunc(object.metadata.uid, '0x00', '0x80')", "unsupported function \"invalidFunc\""),
            ("shardRange(object.metadata.uid, '0x000000000000000000', '0x80')", "hexStart: hex value too long (18 chars, max 17)"),
            ("shardRange(object.metadata.uid, '0x0g00000000000000', '0x8000000000000000')", "hexStart: invalid hex character \"g\""),
            ("shardRange(object.metadata.uid, '0xABCDEF0000000000', '0xffffffffffffffff')", "hexStart: invalid hex character \"A\""),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')", "unsupported function \"_&&_\""),
            ("shardRange(object.metadata.uid, 0, 8)", "hexStart must be a string literal, got int64"),
            ("object.metadata.uid > '0x0'", "unsupported function \"_>_\""),
            ("shardRange(object.metadata.uid, '0x0000000000000000')", "shardRange() requires exactly 3 arguments, got 2"),
            ("shardRange(object.metadata.uid, hex(0), '0x8000000000000000')", "hexStart must be a string literal (e.g. '0xff'), got expression kind call"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')", "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\""),
            ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)"),
            ("shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')", "shard range start 0x8000000000000000 must be less than end 0x8000000000000000"),
            ("shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')", "must be less than end"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')", "17-digit hex value must be '0x10000000000000000'"),
            ("shardRange('object.metadata.uid', '0x0000000000000000', '0x8000000000000000')", "shardRange() first argument: expected field path"),
            ("object.metadata.uid", "unexpected expression kind field selection"),
            ("object.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", "unsupported method call .shardRange()"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'", "CEL parse error"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||", "CEL parse error"),
            ("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') shardRange", "CEL parse error"),
            ("shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')", "CEL parse error"),
            ("shardRange(object.metadata.uid; '0x0000000000000000', '0x8000000000000000')", "CEL parse error"),
        ];
        for (input, want) in cases {
            let got = refused(input);
            assert!(got.contains(want), "{input}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn hostile_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!("{}shardRange{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(refused(&deep).contains("nests deeper"));
        let negs = "!".repeat(10_000);
        assert!(refused(&negs).contains("nests deeper"));
    }

    #[test]
    fn random_token_soup_never_panics_and_what_parses_round_trips() {
        use rand::{Rng, SeedableRng};
        const PIECES: [&str; 26] = [
            "shardRange",
            "(",
            ")",
            "object.metadata.uid",
            "object.metadata.namespace",
            ",",
            "'0x0000000000000000'",
            "'0x8000000000000000'",
            "'0x10000000000000000'",
            "||",
            "&&",
            " ",
            "'",
            "\"",
            "0x",
            "1",
            "[",
            "]",
            "!",
            "-",
            ".",
            "?",
            ":",
            "é",
            "\\",
            "shardRange(",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(5866);
        let mut parsed = 0;
        for _ in 0..20_000 {
            let n = rng.random_range(1..24);
            let s: String = (0..n)
                .map(|_| PIECES[rng.random_range(0..PIECES.len())])
                .collect();
            if let Ok(sel) = ShardSelector::parse(&s) {
                parsed += 1;
                assert_eq!(ShardSelector::parse(&sel.to_string()).unwrap(), sel, "{s}");
            }
        }
        assert!(parsed < 20_000);
        // Well-formed selectors in random spacing and quoting parse to their ranges and print
        // back to themselves.
        for _ in 0..2_000 {
            let field = if rng.random_bool(0.5) {
                "uid"
            } else {
                "namespace"
            };
            let ranges: Vec<(u64, u128)> = (0..rng.random_range(1..5))
                .map(|_| {
                    let a: u64 = rng.random();
                    let b: u128 = if rng.random_bool(0.2) {
                        HASH_SPACE_END
                    } else {
                        u128::from(a) + 1 + u128::from(rng.random::<u64>() >> 1)
                    };
                    (a, b.min(HASH_SPACE_END))
                })
                .collect();
            let sp = |r: &mut rand::rngs::StdRng| " ".repeat(r.random_range(0..3));
            let q = if rng.random_bool(0.5) { '\'' } else { '"' };
            let text = ranges
                .iter()
                .map(|(a, b)| {
                    format!(
                        "{}shardRange({}object.metadata.{field}{},{}{q}0x{a:016x}{q}{},{}{q}0x{b:016x}{q}{}){}",
                        sp(&mut rng), sp(&mut rng), sp(&mut rng), sp(&mut rng), sp(&mut rng),
                        sp(&mut rng), sp(&mut rng), sp(&mut rng)
                    )
                })
                .collect::<Vec<_>>()
                .join("||");
            let sel = ShardSelector::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let got: Vec<(u64, u128)> = sel.ranges().iter().map(|r| (r.start(), r.end())).collect();
            assert_eq!(got, ranges, "{text}");
            assert_eq!(ShardSelector::parse(&sel.to_string()).unwrap(), sel);
        }
    }

    #[test]
    fn ranges_are_half_open() {
        let r = ShardRange::new(10, 20).unwrap();
        assert!(!r.contains(9) && r.contains(10) && r.contains(19) && !r.contains(20));
        assert!(ShardRange::full().contains(u64::MAX));
        assert!(ShardRange::new(5, 5).is_none());
        assert!(ShardRange::new(0, HASH_SPACE_END + 1).is_none());
    }
}
