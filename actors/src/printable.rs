//! Text that a tenant wrote, made safe to show an operator. A GPUClaim's
//! `className`, a condition's message or a VMI's annotation reaches
//! `gpu-claims status`' table, text log lines and Event messages; raw, an
//! ESC could clear the operator's screen or retitle the terminal, a CR or
//! newline could forge a line of the report, and a bidirectional override
//! could show text in another order than it is. kubectl's printers escape
//! ESC and CR (`printers.EscapeTerminal`); we escape every control
//! character and the bidi controls, so one line stays one line.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as itself.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `s` with control characters shown, not acted on: ESC as `^[` (as
/// kubectl shows it), CR, LF and tab as `\r`, `\n`, `\t`, the rest as
/// `\u{..}`. Borrowed when there is nothing to escape (the usual case).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\u{1b}' => out.push_str("^["),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_a_tenant_wrote_are_shown_not_acted_on() {
        let cases = [
            ("h200", "h200"),
            ("\u{1b}[2J\u{1b}]0;pwned\u{7}", "^[[2J^[]0;pwned\\u{7}"),
            (
                "a\r\nWAITING AT THE GATE\n  (none)",
                "a\\r\\nWAITING AT THE GATE\\n  (none)",
            ),
            ("tab\there", "tab\\there"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("\u{7f}", "\\u{7f}"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("Grüße, 東京", "Grüße, 東京"),
        ];
        for (raw, shown) in cases {
            assert_eq!(printable(raw), shown, "{raw:?}");
        }
        assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn an_event_note_shows_what_a_tenant_wrote_without_acting_on_it() {
        use crate::ports::{Event, Kind, ObjRef};
        let e = Event {
            regarding: ObjRef::new(Kind::Vmi, Some("t"), "vm"),
            uid: None,
            warning: true,
            reason: "BadRequest".into(),
            message: "G2: its spec requests nvidia.com/x\u{1b}[2J\r\nFAKE".into(),
            rule: crate::rules::RuleId::G2,
            related: None,
        };
        assert_eq!(
            e.note(),
            "G2: its spec requests nvidia.com/x^[[2J\\r\\nFAKE"
        );
    }
}
