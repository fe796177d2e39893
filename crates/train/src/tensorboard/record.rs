//! The record framing of TFRecord files, which event files are: each record is its length
//! (u64, little-endian), the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of
//! the data (both u32, little-endian).

use std::io::{self, Write};

/// The CRC32C of `bytes`, rotated right by 15 bits plus a constant, as TFRecord stores it (a
/// CRC of data that holds CRCs is weak otherwise).
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes).rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Writes `data` as one record.
pub fn write_record(out: &mut impl Write, data: &[u8]) -> io::Result<()> {
    let len = (data.len() as u64).to_le_bytes();
    out.write_all(&len)?;
    out.write_all(&masked_crc32c(&len).to_le_bytes())?;
    out.write_all(data)?;
    out.write_all(&masked_crc32c(data).to_le_bytes())
}

/// The records of `bytes`, each checked against its CRCs. A record cut short at the end (a
/// writer still writing) ends the list; a CRC that does not match is an error naming the
/// record's offset.
pub fn read_records(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= 12 {
        let len_bytes = &bytes[at..at + 8];
        let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        if crc != masked_crc32c(len_bytes) {
            return Err(format!("the record at byte {at} has a length whose CRC does not match; the file is corrupt"));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        let start = at + 12;
        let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l)).filter(|&e| e.checked_add(4).is_some_and(|e4| e4 <= bytes.len())) else {
            break;
        };
        let data = &bytes[start..end];
        let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes"));
        if crc != masked_crc32c(data) {
            return Err(format!("the record at byte {at} has data whose CRC does not match; the file is corrupt"));
        }
        records.push(data);
        at = end + 4;
    }
    Ok(records)
}
