//! Bounded capture of a stream: the head and the tail are kept, the middle
//! is counted, so a program that floods its output cannot exhaust memory.

use std::io::Write;

pub const DEFAULT_KEEP: usize = 256 * 1024;

#[derive(Debug)]
pub struct Capture {
    keep: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
}

impl Capture {
    pub fn new(keep: usize) -> Self {
        Capture {
            keep,
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.keep {
            let take = bytes.len().min(self.keep - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        if bytes.len() >= self.keep {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.keep..]);
            return;
        }
        self.tail.extend_from_slice(bytes);
        // Trim only when twice the budget, so trimming stays amortised O(1).
        if self.tail.len() > 2 * self.keep {
            let cut = self.tail.len() - self.keep;
            self.tail.drain(..cut);
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    fn tail(&self) -> &[u8] {
        let start = self.tail.len().saturating_sub(self.keep);
        &self.tail[start..]
    }

    fn omitted(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail().len() as u64
    }

    /// Head, a marker saying how much was left out, then tail.
    pub fn write_to(&self, mut out: impl Write) -> std::io::Result<()> {
        out.write_all(&self.head)?;
        let omitted = self.omitted();
        if omitted > 0 {
            writeln!(out, "\n[vkexit: {omitted} bytes omitted]")?;
        }
        out.write_all(self.tail())
    }

    pub fn to_lossy_string(&self) -> String {
        let mut v = Vec::new();
        self.write_to(&mut v)
            .expect("writing to memory cannot fail");
        String::from_utf8_lossy(&v).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(8);
        c.push(b"hello");
        assert_eq!(c.to_lossy_string(), "hello");
    }

    #[test]
    fn a_flood_keeps_head_and_tail_within_budget() {
        let mut c = Capture::new(4);
        for i in 0..1000u32 {
            c.push(format!("{i:04}").as_bytes());
        }
        assert_eq!(c.total(), 4000);
        let s = c.to_lossy_string();
        assert!(s.starts_with("0000"), "{s}");
        assert!(s.ends_with("0999"), "{s}");
        assert!(s.contains("[vkexit: 3992 bytes omitted]"), "{s}");
        assert!(c.tail.len() <= 8 + 4);
    }

    #[test]
    fn one_huge_write_keeps_its_last_bytes() {
        let mut c = Capture::new(3);
        c.push(b"abcdefghij");
        assert_eq!(c.to_lossy_string(), "abc\n[vkexit: 4 bytes omitted]\nhij");
    }
}
