//! The executable text sections of the two code objects (borrowed bytes, address lookups).

use hsaco::elf::Section;
use hsaco::CodeObject;

use crate::VerifyError;

/// The executable `.text` section of one code object (its bytes borrowed from the parsed code
/// object, not copied).
#[derive(Clone, Copy)]
pub(crate) struct Text<'a> {
    /// Virtual address (bytes).
    pub addr: u64,
    /// File offset (bytes).
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// Name of the section of the new segment that holds the instrumented functions when the
/// rewriter keeps `.text` in place (the rewriter's `KEPT_TEXT_SECTION`; docs/left-alone.md).
pub(crate) const KEPT_TEXT_SECTION: &str = ".sqtt_text";

impl<'a> Text<'a> {
    /// The rewritten object's texts: the one executable section, or, when `.text` is kept in
    /// place, the new section [`KEPT_TEXT_SECTION`] and the kept `.text` (second).
    pub(super) fn of_rewritten(
        co: &'a CodeObject,
    ) -> Result<(Text<'a>, Option<Text<'a>>), VerifyError> {
        let execs: Vec<_> = co.exec_sections().collect();
        if let [a, b] = execs.as_slice() {
            let (kept, new) = match (a.name.as_str(), b.name.as_str()) {
                (".text", KEPT_TEXT_SECTION) => (a, b),
                (KEPT_TEXT_SECTION, ".text") => (b, a),
                _ => return Ok((Text::of(co, "rewritten")?, None)),
            };
            let (new, kept) = (Text::of_section(co, new), Text::of_section(co, kept));
            if u32::try_from(new.end().saturating_sub(kept.addr)).is_err() || new.addr < kept.end()
            {
                return Err(VerifyError::Text {
                    which: "rewritten",
                    detail: format!(
                        "{KEPT_TEXT_SECTION} at {:#x} must lie above .text and end less than 4 GiB after its start",
                        new.addr
                    ),
                });
            }
            return Ok((new, Some(kept)));
        }
        Ok((Text::of(co, "rewritten")?, None))
    }

    pub(super) fn of(co: &'a CodeObject, which: &'static str) -> Result<Text<'a>, VerifyError> {
        let execs: Vec<_> = co.exec_sections().collect();
        let [sec] = execs.as_slice() else {
            return Err(VerifyError::Text {
                which,
                detail: format!(
                    "expected exactly one executable section, found {}",
                    execs.len()
                ),
            });
        };
        let t = Text::of_section(co, sec);
        // Instructions keep their places as `u32` offsets ([`OInst`]).
        if u32::try_from(t.bytes.len()).is_err() {
            return Err(VerifyError::Text {
                which,
                detail: format!(
                    "executable section of {} bytes (at most 4 GiB are supported)",
                    t.bytes.len()
                ),
            });
        }
        Ok(t)
    }

    /// The text of section `sec` of `co` (its bytes borrowed).
    pub(super) fn of_section(co: &'a CodeObject, sec: &hsaco::elf::Section) -> Text<'a> {
        Text {
            addr: sec.addr,
            offset: sec.offset,
            bytes: co.section_data(sec),
        }
    }

    pub fn end(&self) -> u64 {
        self.addr + self.bytes.len() as u64
    }

    pub fn contains(&self, a: u64) -> bool {
        a >= self.addr && a < self.end()
    }

    /// Bytes from address `start` to the end of the section (empty outside it).
    pub fn from(&self, start: u64) -> &'a [u8] {
        let s = start.wrapping_sub(self.addr);
        usize::try_from(s)
            .ok()
            .and_then(|s| self.bytes.get(s..))
            .unwrap_or_default()
    }

    /// Bytes of `[start, end)` clipped to the section.
    pub fn slice(&self, start: u64, end: u64) -> &'a [u8] {
        let s = start.saturating_sub(self.addr) as usize;
        let e = (end.saturating_sub(self.addr) as usize).min(self.bytes.len());
        self.bytes.get(s..e).unwrap_or_default()
    }
}

/// The section of `co` that corresponds to `s` of the other object: the one of the same name, or
/// for an empty name (which the null section 0 also has) the one at the same index with an empty
/// name.
pub(crate) fn counterpart<'c>(co: &'c CodeObject, s: &Section) -> Option<&'c Section> {
    match s.name.as_str() {
        "" => co
            .elf
            .sections
            .get(s.index)
            .filter(|x| x.name.is_empty() && x.index != 0),
        name => co.section(name),
    }
}
