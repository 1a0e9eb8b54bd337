//! The estimates upstream's own tests expect (`dynamic-resource-allocation/
//! cel/compile_test.go`, `expectCost`), and the selectors a tenant could
//! use to stall an allocator.

use super::{SELECTOR_MAX_COST, estimate, too_complex};

fn cost(e: &str) -> u64 {
    let p = cel::Program::compile(e).unwrap_or_else(|err| panic!("{e}: {err}"));
    estimate(p.expression())
}

/// `[0, 1, …, n-1]` written out, as a tenant would to loop n times.
fn range(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

#[test]
fn upstream_expected_estimates() {
    let table: &[(&str, u64)] = &[
        (r#"device.driver == """#, 2),
        (r#"device.driver == "dra.example.com""#, 4),
        (r#"device.attributes["dra.example.com"].name == "fish""#, 5),
        (
            r#"device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1"))"#,
            6,
        ),
        (
            r#"device.attributes.exists_one(x, x == "dra.example.com")"#,
            164,
        ),
        (
            r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#,
            18,
        ),
        (
            r#"device.attributes["dra.example.com"].names.all(x, x != "")"#,
            5 + (2 + 2) * 64,
        ),
    ];
    for (e, want) in table {
        assert_eq!(cost(e), *want, "{e}");
    }
}

#[test]
fn nested_loops_multiply_as_upstream_estimates_them() {
    // compile_test.go's "expensive": seven nested `all` over ten elements
    // of `int('1'.find('[0-9]*')) < 100` estimate 85,555,551.
    let list = "[1,2,3,4,5,6,7,8,9,10]";
    let mut e = "int('1'.find('[0-9]*')) < 100".to_string();
    for v in ["g", "f", "e", "d", "c", "b", "a"] {
        e = format!("{list}.all({v}, {e})");
    }
    assert_eq!(cost(&e), 85_555_551);
}

#[test]
fn a_tenant_s_four_nested_loops_of_sixty_are_too_complex() {
    let r = range(60);
    let e = format!("{r}.all(a, {r}.all(b, {r}.all(c, {r}.all(d, a+b+c+d >= 0))))");
    assert!(e.len() < 10 * 1024);
    assert_eq!(cost(&e), 145_635_251);
    let three = format!("{r}.all(a, {r}.all(b, {r}.all(c, a+b+c >= 0)))");
    assert_eq!(cost(&three), 1_995_251);
    let p = cel::Program::compile(&three).unwrap();
    assert!(too_complex(p.expression()));
    let two = format!("{r}.all(a, {r}.all(b, a+b >= 0))");
    assert_eq!(cost(&two), 26_051);
}

#[test]
fn the_limit_is_strictly_over_a_million() {
    // 11 + 60 * (3 + p) per level; a flat loop over a long list is linear.
    let r = range(1000);
    let e = format!("{r}.all(a, a >= 0)");
    assert_eq!(cost(&e), 10 + 1 + 1000 * (3 + 2));
    assert!(cost(&e) <= SELECTOR_MAX_COST);
}

#[test]
fn iterating_what_has_no_declared_size_has_no_bound() {
    // An unknown variable's size is unknown: looping over it saturates.
    assert_eq!(cost("undeclared.all(x, x > 0)"), u64::MAX);
    // An attribute of a device has a declared size: the loop is bounded.
    assert!(cost(r#"device.attributes["d"].list.exists(x, x == 1)"#) < 1_000);
}

#[test]
fn string_work_costs_by_declared_length() {
    // A driver name is at most 63 bytes: a tenth of it, rounded up.
    assert_eq!(cost(r#"device.driver.startsWith("gpu")"#), 2 + 1);
    assert_eq!(cost(r#"device.driver.contains("nvidia")"#), 2 + 7);
    // `in` on a list costs its length.
    assert_eq!(cost(r#"device.driver in ["a", "b", "c"]"#), 2 + 10 + 3);
    // `in` on a map costs 1.
    assert_eq!(cost(r#""gpu.nvidia.com" in device.attributes"#), 2 + 1);
    // has() costs no presence test.
    assert_eq!(cost(r#"has(device.attributes["d"].x)"#), 3);
}

#[test]
fn logical_operators_count_both_sides_and_conditionals_the_dearer_branch() {
    let a = r#"device.driver == "dra.example.com""#;
    assert_eq!(cost(&format!("{a} && {a}")), 8);
    assert_eq!(cost(&format!("{a} || {a}")), 8);
    assert_eq!(cost(&format!("{a} ? {a} : true")), 8);
}

#[test]
fn map_and_filter_build_lists_of_the_range_s_size() {
    // map: R + 11 + N (12 + f); the result has N elements, so a loop over
    // it is bounded by N.
    let r = range(10);
    assert_eq!(
        cost(&format!("{r}.map(x, x + 1).size() > 0")),
        10 + 11 + 10 * (12 + 2) + 1 + 1
    );
    let inner = cost(&format!("{r}.filter(x, x > 1).all(y, y > 0)"));
    // filter: 10 + 11 + 10 * (13 + 2); all over its 10: 1 + 10 * (3 + 2).
    assert_eq!(inner, 10 + 11 + 10 * (13 + 2) + 1 + 10 * (3 + 2));
}
