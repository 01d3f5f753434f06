//! The Redis protocol (RESP 2), as far as a remote copy's batches need it:
//! encoding a `BITFIELD` command of many fields straight from their
//! offsets, and taking one reply off the front of what a connection has
//! read so far. The Perl module's connections of its own send batches
//! through these, so that no command argument or reply element becomes a
//! Perl value.

use crate::error::{Error, Result};

/// One reply, as far as it is understood here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An array of integers (a `BITFIELD` reply), each as its 64-bit
    /// two's-complement pattern.
    Ints(Vec<u64>),
    /// An error reply (`-ERR ...`, `-MOVED 1234 host:port`, ...): the
    /// server did not run the command.
    Error(String),
    /// A status reply (`+OK`).
    Status(String),
    /// A reply of another shape (a nil, a bulk string, an array that holds
    /// anything but integers), read whole and skipped.
    Other,
}

/// The bytes an encoded command of `fields` `BITFIELD` fields takes at
/// most, with a key of `key_len` bytes: what a caller's buffer must hold.
pub fn max_command_len(key_len: usize, fields: usize) -> usize {
    // "*N\r\n" and "$N\r\nBITFIELD_RO\r\n" and the key's bulk header: 64;
    // per field at most 52: an add's "$3\r\nSET\r\n" 9, "$2\r\nu1\r\n" 8,
    // "$20\r\n" + 20 digits + "\r\n" 27 and "$1\r\n1\r\n" 7 make 51; a
    // query's "$3\r\nGET\r\n" 9, "$3\r\ni64\r\n" 9 and the offset 27, 45.
    64 + key_len + fields * 52
}

fn push_bulk_len(out: &mut Vec<u8>, n: usize) {
    out.push(b'$');
    push_decimal(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

fn push_decimal(out: &mut Vec<u8>, v: u64) {
    let mut dec = [0u8; 20];
    let mut i = dec.len();
    let mut v = v;
    loop {
        i -= 1;
        dec[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&dec[i..]);
}

/// Append one `BITFIELD` command on `key` to `out`: for an add (`set`),
/// `SET u1 OFFSET 1` for each offset; for a query, `BITFIELD_RO` with
/// `GET u1 OFFSET` (`width` 1) or `GET i64 OFFSET` (`width` 64).
pub fn encode_bitfield(out: &mut Vec<u8>, key: &[u8], set: bool, width: u64, offsets: &[u64]) -> Result<()> {
    let ty: &[u8] = match (set, width) {
        (true, 1) | (false, 1) => b"$2\r\nu1\r\n",
        (false, 64) => b"$3\r\ni64\r\n",
        _ => {
            return Err(Error::arg(format!(
                "no BITFIELD field of {width} bits for this command"
            )))
        }
    };
    out.reserve(max_command_len(key.len(), offsets.len()));
    out.push(b'*');
    push_decimal(out, (2 + offsets.len() * if set { 4 } else { 3 }) as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(if set {
        b"$8\r\nBITFIELD\r\n"
    } else {
        b"$11\r\nBITFIELD_RO\r\n"
    });
    push_bulk_len(out, key.len());
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
    let mut dec = Vec::with_capacity(20);
    for &o in offsets {
        out.extend_from_slice(if set { b"$3\r\nSET\r\n" } else { b"$3\r\nGET\r\n" });
        out.extend_from_slice(ty);
        dec.clear();
        push_decimal(&mut dec, o);
        push_bulk_len(out, dec.len());
        out.extend_from_slice(&dec);
        out.extend_from_slice(b"\r\n");
        if set {
            out.extend_from_slice(b"$1\r\n1\r\n");
        }
    }
    Ok(())
}

/// The longest protocol line taken, CRLF not counted. A reply to any
/// command of ours is lines of a few dozen bytes (integers, an error's or a
/// status's text); a line that has not ended by then is refused as soon as
/// that many bytes are in, rather than buffered (and searched again) as it
/// keeps coming. The Perl module's replies of other commands have the same
/// bound (`$MAX_LINE` there).
pub const MAX_LINE: usize = 1 << 16;

/// The line at the start of `buf` (without its CRLF) and the bytes up to
/// the end of its CRLF; None until the CRLF has arrived. Only the first
/// `MAX_LINE + 2` bytes are looked at: one that is longer is an error.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>> {
    let head = &buf[..buf.len().min(MAX_LINE + 2)];
    match head.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&buf[..end], end + 2))),
        None if head.len() == MAX_LINE + 2 => {
            Err(Error::format(format!("a protocol line longer than {MAX_LINE} bytes")))
        }
        None => Ok(None),
    }
}

/// A RESP integer: an optional '-' and 1 to 19 digits, within i64.
pub fn integer(s: &[u8]) -> Result<i64> {
    let bad = || Error::format(format!("'{}' is not a protocol integer", s.escape_ascii()));
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let v: i128 = digits.iter().fold(0, |v, &d| v * 10 + (d - b'0') as i128);
    let v = if neg { -v } else { v };
    i64::try_from(v).map_err(|_| bad())
}

/// The text of a status or error line, as far as it is valid UTF-8.
fn text(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

/// Arrays nested deeper than this are refused (nothing we send is answered
/// with one; a deep one would only be a hostile or broken server).
const MAX_DEPTH: usize = 8;

/// The most elements an array reply may claim, and bytes a bulk string: a
/// command of ours is answered with at most a few thousand integers, and a
/// claim past these would only have us wait and buffer without end.
const MAX_ELEMENTS: i64 = 1 << 20;
const MAX_BULK: i64 = 1 << 20;

/// Skip one reply of any type at the start of `buf`: the bytes it takes,
/// or None until all of it has arrived.
fn skip(buf: &[u8], depth: usize) -> Result<Option<usize>> {
    let Some((l, mut at)) = line(buf)? else { return Ok(None) };
    let Some((&kind, rest)) = l.split_first() else {
        return Err(Error::format("an empty protocol line"));
    };
    match kind {
        b'+' | b'-' | b':' => Ok(Some(at)),
        b'$' => {
            let n = integer(rest)?;
            if n < 0 {
                return Ok(Some(at)); // nil
            }
            if n > MAX_BULK {
                return Err(Error::format("a bulk reply sized past all bounds"));
            }
            let need = at as u64 + n as u64 + 2;
            if (buf.len() as u64) < need {
                return Ok(None);
            }
            let end = need as usize;
            if &buf[end - 2..end] != b"\r\n" {
                return Err(Error::format("a bulk string without its CRLF"));
            }
            Ok(Some(end))
        }
        b'*' => {
            let n = integer(rest)?;
            if depth >= MAX_DEPTH || n > MAX_ELEMENTS {
                return Err(Error::format("a reply nested or sized past all bounds"));
            }
            for _ in 0..n.max(0) {
                match skip(&buf[at..], depth + 1)? {
                    Some(len) => at += len,
                    None => return Ok(None),
                }
            }
            Ok(Some(at))
        }
        _ => Err(Error::format(format!(
            "'{}' does not start a protocol reply",
            kind.escape_ascii()
        ))),
    }
}

/// Take one reply off the front of `buf`: the bytes it takes and the
/// reply, or None until all of it has arrived (`buf` may end anywhere).
/// Bytes that cannot be a reply are an error: the connection is then of
/// no further use.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(usize, Reply)>> {
    let Some((l, at)) = line(buf)? else { return Ok(None) };
    let Some((&kind, rest)) = l.split_first() else {
        return Err(Error::format("an empty protocol line"));
    };
    match kind {
        b'+' => Ok(Some((at, Reply::Status(text(rest))))),
        b'-' => Ok(Some((at, Reply::Error(text(rest))))),
        b'*' => {
            let n = integer(rest)?;
            if n > MAX_ELEMENTS {
                return Err(Error::format("a reply sized past all bounds"));
            }
            let mut ints = Vec::with_capacity(n.clamp(0, 1 << 16) as usize);
            let mut pos = at;
            for _ in 0..n.max(0) {
                let Some((el, len)) = line(&buf[pos..])? else {
                    return Ok(None);
                };
                match el.split_first() {
                    Some((b':', digits)) => {
                        ints.push(integer(digits)? as u64);
                        pos += len;
                    }
                    _ => {
                        // Not an integer array: skip the rest of it whole.
                        return Ok(skip(buf, 0)?.map(|len| (len, Reply::Other)));
                    }
                }
            }
            Ok(Some((pos, if n < 0 { Reply::Other } else { Reply::Ints(ints) })))
        }
        _ => Ok(skip(buf, 0)?.map(|len| (len, Reply::Other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RESP encoding of a command, written the obvious way.
    fn reference(args: &[&str]) -> Vec<u8> {
        let mut s = format!("*{}\r\n", args.len());
        for a in args {
            s += &format!("${}\r\n{a}\r\n", a.len());
        }
        s.into_bytes()
    }

    #[test]
    fn bitfield_commands_encode_as_resp() {
        let offs = [0u64, 7, 4_294_967_295, u64::MAX];
        let mut out = Vec::new();
        encode_bitfield(&mut out, b"{events}:bits", true, 1, &offs).unwrap();
        let mut args = vec!["BITFIELD".to_string(), "{events}:bits".to_string()];
        for o in offs {
            args.extend(["SET".into(), "u1".into(), o.to_string(), "1".into()]);
        }
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        assert_eq!(out, reference(&refs));
        assert!(out.len() <= max_command_len(13, offs.len()));

        for (width, ty) in [(1u64, "u1"), (64, "i64")] {
            let mut q = b"keep".to_vec();
            encode_bitfield(&mut q, b"k", false, width, &offs).unwrap();
            let mut args = vec!["BITFIELD_RO".to_string(), "k".to_string()];
            for o in offs {
                args.extend(["GET".into(), ty.into(), o.to_string()]);
            }
            let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            assert_eq!(&q[..4], b"keep", "appended");
            assert_eq!(q[4..], reference(&refs)[..]);
        }
        let mut e = Vec::new();
        encode_bitfield(&mut e, b"k", false, 1, &[]).unwrap();
        assert_eq!(e, reference(&["BITFIELD_RO", "k"]));
        assert!(
            encode_bitfield(&mut e, b"k", true, 64, &[1]).is_err(),
            "adds set single bits"
        );
        assert!(encode_bitfield(&mut e, b"k", false, 8, &[1]).is_err());
    }

    #[test]
    fn replies_parse_whole_and_wait_for_the_rest() {
        let ints = b"*4\r\n:0\r\n:1\r\n:-1\r\n:-9223372036854775808\r\n";
        let want = Reply::Ints(vec![0, 1, u64::MAX, 1 << 63]);
        assert_eq!(parse_reply(ints).unwrap(), Some((ints.len(), want.clone())));
        // Every cut short of the end waits; the reply with more behind it
        // is taken alone.
        for cut in 0..ints.len() {
            assert_eq!(parse_reply(&ints[..cut]).unwrap(), None, "cut at {cut}");
        }
        let mut two = ints.to_vec();
        two.extend_from_slice(b"+OK\r\n");
        assert_eq!(parse_reply(&two).unwrap(), Some((ints.len(), want)));
        assert_eq!(
            parse_reply(&two[ints.len()..]).unwrap(),
            Some((5, Reply::Status("OK".into())))
        );
        let moved = b"-MOVED 3999 127.0.0.1:6381\r\n";
        assert_eq!(
            parse_reply(moved).unwrap(),
            Some((moved.len(), Reply::Error("MOVED 3999 127.0.0.1:6381".into())))
        );
        assert_eq!(parse_reply(b"*0\r\n").unwrap(), Some((4, Reply::Ints(vec![]))));
        assert_eq!(parse_reply(b"*-1\r\n").unwrap(), Some((5, Reply::Other)));
        // Other shapes are read whole and skipped, also when cut.
        for other in [
            &b"$5\r\nhello\r\n"[..],
            b"$-1\r\n",
            b":42\r\n",
            b"*3\r\n:1\r\n$-1\r\n*2\r\n$1\r\na\r\n+x\r\n",
            b"*2\r\n:1\r\n$3\r\nabc\r\n",
        ] {
            assert_eq!(
                parse_reply(other).unwrap(),
                Some((other.len(), Reply::Other)),
                "{other:?}"
            );
            for cut in 0..other.len() {
                assert_eq!(parse_reply(&other[..cut]).unwrap(), None, "{other:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn garbage_is_refused_not_trusted() {
        for bad in [
            &b"?what\r\n"[..],
            b"\r\n",
            b"*x\r\n",
            b"*1\r\n:12a\r\n",
            b"*1\r\n:99999999999999999999\r\n",
            b"*1\r\n:\r\n",
            b"$3\r\nabcde",
            b"*5000000000\r\n",
            b"*2000000\r\n",
            b"$9999999999\r\n",
            b"*1\r\n$2000000\r\n",
        ] {
            assert!(parse_reply(bad).is_err(), "{bad:?}");
        }
        // A line that never ends is refused once MAX_LINE + 2 bytes are in,
        // whatever its type, also inside an array; one byte fewer waits.
        for start in [&b"+"[..], b"-", b":", b"$", b"*", b"*1\r\n:", b"*2\r\n:1\r\n$"] {
            let mut long = start.to_vec();
            long.resize(MAX_LINE + 1, b'7');
            assert_eq!(parse_reply(&long).unwrap(), None, "{:?} waits", &start);
            let at = start.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            long.resize(at + MAX_LINE + 2, b'7');
            assert!(parse_reply(&long).is_err(), "{:?} is refused", &start);
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 2) + ":1\r\n";
        assert!(parse_reply(deep.as_bytes()).is_err());
        assert_eq!(integer(b"-0").unwrap(), 0);
        assert!(integer(b"-").is_err());
        assert!(integer(b"9223372036854775808").is_err());
    }
}
