//! The design in the repository (issue 34, item 1): every rule id the code
//! and tests use (`L6`, `G3`, `I5`, ranges such as `L2-L7` included) is
//! defined in `docs/design.md` and has a row in its rule map; each row
//! names a file and function that exist and cite the rule, and test files
//! that exist and name a test after it; a rule the map says is not built
//! is cited nowhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DESIGN: &str = "docs/design.md";
/// Where rule ids are used.
const SOURCES: &[&str] = &[
    "src",
    "tests",
    "actors/src",
    "actors/tests",
    "testbed/src",
    "apiserver/src",
    "apiserver/tests",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A rule id: a letter of a section and its number (`L12`, `I8`).
fn rule_id(token: &str) -> Option<(char, u32)> {
    let mut chars = token.chars();
    let letter = chars.next().filter(|c| "LGQDEOI".contains(*c))?;
    let digits = chars.as_str();
    if digits.is_empty() || digits.starts_with('0') || digits.len() > 2 {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    (n < 20).then_some((letter, n))
}

/// The rule ids a text uses, a range (`L2-L7`) standing for each id in it.
fn ids_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // Maximal runs of ASCII letters and digits, with where each starts.
    let mut tokens: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_ascii_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                tokens.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    for (k, (at, token)) in tokens.iter().enumerate() {
        let Some((letter, n)) = rule_id(token) else {
            continue;
        };
        out.insert(format!("{letter}{n}"));
        // A range: this id, '-', the same letter's later id.
        let end = at + token.len();
        if text[end..].starts_with('-')
            && let Some((_, next)) = tokens.get(k + 1)
            && let Some((l2, m)) = rule_id(next)
            && l2 == letter
            && m > n
        {
            for i in n..=m {
                out.insert(format!("{letter}{i}"));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each rule id used in the sources, with a file that uses it.
fn used_ids() -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    for d in SOURCES {
        rust_files(&root().join(d), &mut files);
    }
    let mut used = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for id in ids_in(&text) {
            used.entry(id).or_insert_with(|| f.clone());
        }
    }
    used
}

/// A row of the rule map.
struct Row {
    id: String,
    decided_by: String,
    writes: String,
    tests: String,
}

fn rule_map(doc: &str) -> Vec<Row> {
    let map = doc.split("## Rule map").nth(1).expect("a Rule map section");
    map.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Rule"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "a row of five cells: {l}");
            Row {
                id: cells[0].to_string(),
                decided_by: cells[1].to_string(),
                writes: cells[2].to_string(),
                tests: cells[4].to_string(),
            }
        })
        .collect()
}

/// The backticked words of a cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// A cell of places: `path` `fn`, `fn`; `path` `fn`: each file and the
/// functions named in it.
fn places(cell: &str) -> Vec<(&str, Vec<&str>)> {
    cell.split(';')
        .filter_map(|group| {
            let words = quoted(group);
            let (path, fns) = words.split_first()?;
            Some((*path, fns.to_vec()))
        })
        .collect()
}

/// What is wrong with a cell of places: a file that does not exist, a
/// function not in its file.
fn wrong_places(id: &str, column: &str, cell: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, fns) in places(cell) {
        let Ok(text) = std::fs::read_to_string(root().join(path)) else {
            wrong.push(format!("{id}: {column}: {path} does not exist"));
            continue;
        };
        for f in fns {
            if !text.contains(&format!("fn {f}")) {
                wrong.push(format!("{id}: {column}: no fn {f} in {path}"));
            }
        }
    }
    wrong
}

#[test]
fn every_rule_id_the_code_uses_is_defined_in_the_design_and_mapped() {
    let doc = std::fs::read_to_string(root().join(DESIGN)).unwrap();
    let rows = rule_map(&doc);
    let mapped: BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let mut missing = Vec::new();
    for (id, file) in used_ids() {
        if !mapped.contains(id.as_str()) {
            missing.push(format!("{id} (used in {})", file.display()));
        }
        if !doc.contains(&format!("**{id}.")) {
            missing.push(format!("{id} has no definition (`**{id}.`)"));
        }
    }
    assert!(missing.is_empty(), "rule ids not in {DESIGN}: {missing:#?}");
}

#[test]
fn the_rule_map_names_functions_and_tests_that_exist_and_cite_their_rule() {
    let doc = std::fs::read_to_string(root().join(DESIGN)).unwrap();
    let used = used_ids();
    let mut wrong = Vec::new();
    for row in rule_map(&doc) {
        let id = &row.id;
        if !doc.contains(&format!("**{id}.")) {
            wrong.push(format!("{id}: mapped but not defined"));
        }
        if row.decided_by == "not built" {
            if let Some(f) = used.get(id) {
                wrong.push(format!("{id}: 'not built', yet cited in {}", f.display()));
            }
            continue;
        }
        let decided = places(&row.decided_by);
        let Some((path, _)) = decided.first() else {
            wrong.push(format!("{id}: no file decides it"));
            continue;
        };
        wrong.extend(wrong_places(id, "decided by", &row.decided_by));
        wrong.extend(wrong_places(id, "writes", &row.writes));
        if row.writes.is_empty() {
            wrong.push(format!("{id}: its writes are not said (none: say so)"));
        }
        let text = std::fs::read_to_string(root().join(path)).unwrap_or_default();
        if path.ends_with(".rs") && !ids_in(&text).contains(id) {
            wrong.push(format!("{id}: {path} does not cite it"));
        }
        let tests = quoted(&row.tests);
        if tests.is_empty() {
            wrong.push(format!("{id}: no tests named"));
        }
        for t in tests {
            let Ok(text) = std::fs::read_to_string(root().join(t)) else {
                wrong.push(format!("{id}: test file {t} does not exist"));
                continue;
            };
            // Rules have tests named after them; invariants are checked
            // by every test that runs a cluster, and cited there.
            let named = format!("fn {}_", id.to_lowercase());
            let ok = if id.starts_with('I') {
                ids_in(&text).contains(id)
            } else {
                text.contains(&named)
            };
            if !ok {
                wrong.push(format!("{id}: {t} has no test for it"));
            }
        }
    }
    assert!(wrong.is_empty(), "{DESIGN}'s rule map: {wrong:#?}");
}

#[test]
fn rule_ids_and_their_ranges_are_read_as_written() {
    let ids = |t: &str| ids_in(t).into_iter().collect::<Vec<_>>();
    assert_eq!(
        ids("L2-L7: attachments"),
        ["L2", "L3", "L4", "L5", "L6", "L7"]
    );
    assert_eq!(
        ids("I1-I5 after every step; G6"),
        ["G6", "I1", "I2", "I3", "I4", "I5"]
    );
    assert_eq!(ids("i64 I64 E2E L0 G12x fn l1_ a1"), Vec::<String>::new());
    assert_eq!(ids("(L12)"), ["L12"]);
}

/// Every file of the repository's own text (code, docs, config, chart):
/// generated protobuf aside.
fn own_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if p.is_dir() {
            if !["target", ".git", "proto", "node_modules"].contains(&name) {
                own_files(&p, out);
            }
        } else if ["rs", "md", "yaml", "tpl", "txt", "py", "json"]
            .iter()
            .any(|x| p.extension().is_some_and(|e| e == *x))
        {
            out.push(p);
        }
    }
}

/// The name of the specification the project was built from, which the
/// repository does not hold: spelled in two pieces so that this file,
/// which looks for citations of it, cites it nowhere itself.
const FOREIGN_SPEC: &str = concat!("SP", "EC");

/// What cites a document the repository does not hold: the
/// specification it was built from (`FOREIGN_SPEC`, its `§`s and
/// numbered sections), or a `.md` file that is not there.
fn foreign_references(text: &str, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line
            .split(|c: char| {
                !c.is_ascii_alphanumeric() && c != '.' && c != '/' && c != '-' && c != '_'
            })
            .collect();
        if words.contains(&FOREIGN_SPEC) || line.contains('§') {
            out.push(format!("line {}: {line}", i + 1));
        }
        let lower = line.to_lowercase();
        if let Some(at) = lower.find("section ")
            && lower[at + "section ".len()..].starts_with(|c: char| c.is_ascii_digit())
        {
            out.push(format!("line {}: a numbered section: {line}", i + 1));
        }
        // A link elsewhere (a URL) is not the repository's to hold.
        for w in words
            .iter()
            .filter(|w| w.ends_with(".md") && w.len() > 3 && !w.contains("//"))
        {
            let path = w.trim_start_matches("./");
            let held = [root(), dir.to_path_buf(), root().join("docs")]
                .iter()
                .any(|d| d.join(path).exists());
            if !held {
                out.push(format!("line {}: {w} is not in the repository", i + 1));
            }
        }
    }
    out
}

#[test]
fn the_repository_cites_no_document_or_section_it_does_not_hold() {
    let mut files = Vec::new();
    own_files(&root(), &mut files);
    let mut wrong = Vec::new();
    for f in files {
        // This file names what it looks for.
        if f.ends_with("tests/design_doc.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let dir = f.parent().unwrap_or(&f);
        for w in foreign_references(&text, dir) {
            wrong.push(format!(
                "{}: {w}",
                f.strip_prefix(root()).unwrap_or(&f).display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_foreign_reference_is_told_from_the_repository_s_own() {
    let here = root();
    assert_eq!(
        foreign_references("see docs/design.md, \"Objects\"", &here),
        Vec::<String>::new()
    );
    let per = format!("per {FOREIGN_SPEC} §8");
    assert_eq!(foreign_references(&per, &here).len(), 1);
    let section = format!("({FOREIGN_SPEC} section 9)");
    assert_eq!(foreign_references(&section, &here).len(), 2);
    assert_eq!(foreign_references("read docs/nowhere.md", &here).len(), 1);
    let alike = format!("GPU_CLAIMS_{FOREIGN_SPEC} or a {FOREIGN_SPEC}TRUM");
    assert!(foreign_references(&alike, &here).is_empty());
}
