use super::*;

/// Outcomes as upstream's parser gives them (`quantity_test.go`, and
/// the arithmetic of `ScaledValue` worked by hand).
#[test]
fn quantities_parse_as_upstream_and_show_its_canonical_form() {
    for (input, canonical) in [
        ("4", "4"),
        ("-4", "-4"),
        ("0.5", "500m"),
        ("-0.5", "-500m"),
        ("1.5", "1500m"),
        ("1000", "1k"),
        ("100m", "100m"),
        ("1Ki", "1Ki"),
        ("2048", "2048"),
        ("1.5Gi", "1536Mi"),
        ("4e3", "4e3"),
        ("1e40", "10e39"),
        ("0", "0"),
        ("-", "0"),
        ("k", "0"),
        ("9223372036854775807", "9223372036854775807"),
        ("12345678901234567890123", "12345678901234567890123"),
    ] {
        let q = parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(q.canonical(), canonical, "{input}");
    }
    for (input, err) in [
        ("", QuantityError::Format),
        ("abc", QuantityError::Format),
        ("1.2.3", QuantityError::Format),
        ("1 Gi", QuantityError::Format),
        ("1ki", QuantityError::Suffix),
        ("1e", QuantityError::Suffix),
        ("1Kib", QuantityError::Format),
    ] {
        assert_eq!(parse(input), Err(err), "{input}");
    }
}

#[test]
fn an_integer_resource_must_have_a_whole_milli_value_with_gos_overflow() {
    for (input, whole) in [
        ("4", true),
        ("0.5", false),
        ("1500m", false),
        ("2000m", true),
        ("1n", false),
        ("1e40", true),
        // The decimal path: (2^63-1) * 1000 wraps to -1000.
        ("9223372036854775807", true),
        ("0.0000000001", false),
        ("1Ki", true),
    ] {
        let q = parse(input).unwrap();
        assert_eq!(q.is_whole(), whole, "{input}: milli {}", q.milli_value());
    }
    assert_eq!(parse("9223372036854775807").unwrap().milli_value(), -1000);
    assert_eq!(parse("0.5").unwrap().milli_value(), 500);
    assert!(parse("-1").unwrap().is_negative());
    assert!(!parse("-0").unwrap().is_negative());
}

#[test]
fn quantities_compare_by_exact_value() {
    use std::cmp::Ordering::*;
    let q = |s: &str| parse(s).unwrap();
    assert_eq!(q("1").cmp_value(&q("1000m")), Equal);
    assert_eq!(q("1Ki").cmp_value(&q("1024")), Equal);
    assert_eq!(q("2").cmp_value(&q("1500m")), Greater);
    assert_eq!(q("-1").cmp_value(&q("0")), Less);
    assert_eq!(q("-1").cmp_value(&q("-2")), Greater);
    assert_eq!(q("1e40").cmp_value(&q("9223372036854775807")), Greater);
}

#[test]
fn json_numbers_are_quantities_too() {
    let q = from_json(&serde_json::json!(4)).unwrap();
    assert_eq!(q.canonical(), "4");
    assert_eq!(
        from_json(&serde_json::json!(-0.5)).unwrap().canonical(),
        "-500m"
    );
    assert!(from_json(&serde_json::json!(true)).is_err());
}
