//! No module of any crate in the workspace depends, through its
//! siblings, on itself: at every level of the module tree, the graph of
//! "a child of P uses another child of P" has no cycle. A newcomer can
//! then read a crate from the bottom up. The paths a module uses are read
//! from its `use` items and its `crate::`, `super::` and `self::` paths
//! (test modules aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

const CRATES: &[&str] = &[".", "actors", "apiserver", "testbed", "serve"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `lib.rs` and
/// `main.rs` the root.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: ModPath = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

/// The text a module compiles outside tests, without comments: every
/// item after a `#[cfg(test)]` is left out (a `mod x;`, or a block to its
/// closing brace), and everything else of the file kept, what comes
/// after a test module included.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    without_test_items(&text)
}

/// `text` without the items `#[cfg(test)]` marks.
fn without_test_items(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        rest = &rest[at + MARK.len()..];
        rest = &rest[item_end(rest)..];
    }
    out.push_str(rest);
    out
}

/// Where the item at the start of `s` ends: after its `;` if it has no
/// body, else after the brace that closes its first (braces in string
/// and char literals not counted).
fn item_end(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'\'' if i + 2 < b.len() && b[i + 2] == b'\'' => i += 2,
            b';' if depth == 0 => return i + 1,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let (prefix, body) = (&tree[..open], &tree[open + 1..tree.len() - 1]);
    let (mut items, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    items.push(cur);
    items
        .iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(|i| expand(i).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// Every path the code names: its `use` trees, expanded, and the
/// `crate::`, `super::` and `self::` paths written inline.
fn paths_in(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let tail = &rest[i + 4..];
        let end = tail.find(';').unwrap_or(tail.len());
        if before_ok {
            out.extend(expand(&tail[..end]));
        }
        rest = &tail[end.min(tail.len())..];
    }
    for start in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(start) {
            let i = at + i;
            let ok = i == 0
                || !code.as_bytes()[i - 1].is_ascii_alphanumeric()
                    && code.as_bytes()[i - 1] != b':';
            let len = code[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - i);
            if ok {
                out.push(code[i..i + len].to_string());
            }
            at = i + len.max(1);
        }
    }
    out
}

/// The module a path names, from `from`: the longest module of the crate
/// it starts with. None for another crate's path.
fn target(path: &str, from: &ModPath, mods: &BTreeSet<ModPath>) -> Option<ModPath> {
    let path = path.split(" as ").next().unwrap_or_default();
    let segs: Vec<&str> = path
        .split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let (mut base, mut rest) = match segs.first() {
        Some(&"crate") => (ModPath::new(), &segs[1..]),
        Some(&("super" | "self")) => (from.clone(), &segs[..]),
        Some(first) if mods.contains(&[from.clone(), vec![first.to_string()]].concat()) => {
            (from.clone(), &segs[..])
        }
        _ => return None,
    };
    while let Some(&s) = rest.first() {
        match s {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    let full: ModPath = base
        .into_iter()
        .chain(rest.iter().map(|s| s.to_string()))
        .collect();
    (0..=full.len())
        .rev()
        .map(|k| full[..k].to_vec())
        .find(|m| mods.contains(m))
}

/// Per parent module, the edges between its children.
fn sibling_edges(krate: &Path) -> BTreeMap<ModPath, BTreeSet<(String, String)>> {
    let src = krate.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let files: Vec<(PathBuf, ModPath)> = files
        .into_iter()
        .map(|f| (f.clone(), module_of(&src, &f)))
        .filter(|(_, m)| !m.iter().any(|s| s == "tests"))
        .collect();
    let mods: BTreeSet<ModPath> = files.iter().map(|(_, m)| m.clone()).collect();
    let mut edges: BTreeMap<ModPath, BTreeSet<(String, String)>> = BTreeMap::new();
    for (file, from) in &files {
        for path in paths_in(&code_of(file)) {
            let Some(to) = target(&path, from, &mods) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                edges
                    .entry(from[..common].to_vec())
                    .or_default()
                    .insert((from[common].clone(), to[common].clone()));
            }
        }
    }
    edges
}

/// A cycle among `edges`, if there is one.
fn a_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeSet<(String, String)>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            return Some(path[i..].to_vec());
        }
        if !done.insert(n.to_string()) {
            return None;
        }
        path.push(n.to_string());
        for (_, b) in edges.iter().filter(|(a, _)| a == n) {
            if let Some(c) = visit(b, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .iter()
        .find_map(|(a, _)| visit(a, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_of_any_crate_depends_on_itself_through_its_siblings() {
    let mut cycles = Vec::new();
    for krate in CRATES {
        for (parent, edges) in sibling_edges(&root().join(krate)) {
            if let Some(c) = a_cycle(&edges) {
                cycles.push(format!(
                    "{krate}: in {}: {}",
                    parent.join("::"),
                    c.join(" -> ")
                ));
            }
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
}

#[test]
fn the_reader_keeps_what_follows_a_test_module_and_leaves_the_tests_out() {
    let code = "use crate::a::b;\n#[cfg(test)]\nmod tests;\nuse crate::c::d;\n#[cfg(test)]\nmod more {\n    use crate::e::f;\n    fn g() { let s = \"}\"; let c = '{'; }\n}\nfn h() { crate::i::j(); }";
    let kept = without_test_items(code);
    let paths = paths_in(&kept);
    for want in ["crate::a::b", "crate::c::d", "crate::i::j"] {
        assert!(paths.iter().any(|p| p == want), "{want} in {paths:?}");
    }
    assert!(!paths.iter().any(|p| p == "crate::e::f"), "{paths:?}");
}

#[test]
fn the_reader_finds_the_paths_a_module_names() {
    let code = "use crate::a::{b, c::{d, e}};\nuse super::f;\nfn x() { crate::g::h(); super::super::i::j(); }";
    let paths = paths_in(code);
    for want in [
        "crate::a::b",
        "crate::a::c::d",
        "crate::a::c::e",
        "super::f",
        "crate::g::h",
        "super::super::i::j",
    ] {
        assert!(paths.iter().any(|p| p == want), "{want} in {paths:?}");
    }
    let mods: BTreeSet<ModPath> = [
        vec![],
        vec!["a".into()],
        vec!["a".into(), "c".into()],
        vec!["i".into()],
    ]
    .into_iter()
    .collect();
    let from: ModPath = vec!["k".into(), "l".into()];
    assert_eq!(
        target("crate::a::c::d", &from, &mods),
        Some(vec!["a".into(), "c".into()])
    );
    assert_eq!(
        target("super::super::i::j", &from, &mods),
        Some(vec!["i".into()])
    );
    assert_eq!(target("std::fmt", &from, &mods), None);
    let ring: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .collect();
    assert!(a_cycle(&ring).is_some());
    let line: BTreeSet<(String, String)> = [("a", "b"), ("b", "c")]
        .iter()
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .collect();
    assert_eq!(a_cycle(&line), None);
}
