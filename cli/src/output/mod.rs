//! Output: the format the user chose, colours only where they belong, tables, and writing to
//! standard output so that a closed pipe ends the program quietly. The room also holds
//! `-o jsonpath=` ([`jsonpath`]), times as kubectl shows them ([`timefmt`]) and the unit tests'
//! output snapshots (`snapshot`).

pub mod jsonpath;
#[cfg(test)]
pub mod snapshot;
pub mod timefmt;

use std::io::{IsTerminal, Write};

use owo_colors::OwoColorize;
use serde::Serialize;

use crate::cli::{ColorChoice, Output, OutputFormat};
use crate::error::CliError;

/// The `apiVersion` of every JSON and YAML report; a change of shape that can break a script
/// gets a new version.
pub const REPORT_API_VERSION: &str = "kubectl-nauthera/v1";

/// How a piece of text should look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Good,
    Warn,
    Bad,
    Dim,
    Strong,
}

/// Paints text with colours, or leaves it plain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Painter {
    pub color: bool,
}

impl Painter {
    #[cfg(test)]
    pub const PLAIN: Painter = Painter { color: false };

    /// Colours on a terminal (or when asked), never with `NO_COLOR` set to anything.
    pub fn detect(choice: ColorChoice) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        let color = !no_color
            && match choice {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => std::io::stdout().is_terminal(),
            };
        Painter { color }
    }

    pub fn paint(&self, text: &str, tone: Tone) -> String {
        if !self.color {
            return text.to_owned();
        }
        match tone {
            Tone::Good => text.green().to_string(),
            Tone::Warn => text.yellow().to_string(),
            Tone::Bad => text.red().to_string(),
            Tone::Dim => text.dimmed().to_string(),
            Tone::Strong => text.bold().to_string(),
        }
    }
}

/// One cell of a [`write_table`] row: its text and its tone.
pub type TableCell = (String, Option<Tone>);

/// A table laid out as [`Painter::table`] lays it out (columns two spaces apart, no trailing
/// blanks), written line by line: the widths come from a first pass over the rows, so that a
/// hundred thousand rows are never held as cells or as one text. `header: None` writes the
/// rows alone.
pub fn write_table<W: Write + ?Sized, R>(
    out: &mut W,
    header: Option<&[&str]>,
    rows: &[R],
    cells: impl Fn(&R) -> Vec<TableCell>,
    painter: Painter,
) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header
        .unwrap_or_default()
        .iter()
        .map(|title| title.chars().count())
        .collect();
    for row in rows {
        for (column, (text, _)) in cells(row).iter().enumerate() {
            let width = text.chars().count();
            match widths.get_mut(column) {
                Some(known) => *known = (*known).max(width),
                None => widths.push(width),
            }
        }
    }
    let mut write_line = |line: Vec<TableCell>| {
        let mut text = String::new();
        for (column, (cell, tone)) in line.into_iter().enumerate() {
            let pad = widths[column] + 2 - cell.chars().count();
            match tone {
                Some(tone) => text.push_str(&painter.paint(&cell, tone)),
                None => text.push_str(&cell),
            }
            text.extend(std::iter::repeat_n(' ', pad));
        }
        let trimmed = text.trim_end();
        out.write_all(trimmed.as_bytes())?;
        out.write_all(b"\n")
    };
    if let Some(header) = header {
        write_line(
            header
                .iter()
                .map(|title| ((*title).to_owned(), None))
                .collect(),
        )?;
    }
    for row in rows {
        write_line(cells(row))?;
    }
    Ok(())
}

/// Writes to standard output through a buffer, as `write` produces it.
pub fn write_stdout(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write(&mut out).map_err(CliError::Output)?;
    out.flush().map_err(CliError::Output)
}

/// `kind.nauthera.io/name`, as `kubectl get -o name` writes a resource.
pub fn resource_name(kind: crate::cli::kinds::Kind, name: &str) -> String {
    format!("{}.nauthera.io/{name}\n", kind.singular())
}

/// The report as JSON or YAML, as text.
pub fn encode<T: Serialize>(value: &T, output: &Output) -> Result<String, CliError> {
    let mut out = Vec::new();
    write_encoded(&mut out, value, output)?;
    String::from_utf8(out).map_err(|error| CliError::Encode {
        format: "JSON",
        detail: error.to_string(),
    })
}

/// Writes the report as JSON or YAML to standard output as it is encoded, never holding the
/// whole text: a report of a hundred thousand resources is as large as its objects.
pub fn emit<T: Serialize>(value: &T, output: &Output) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write_encoded(&mut out, value, output)?;
    out.flush().map_err(CliError::Output)
}

fn write_encoded<W: Write, T: Serialize>(
    out: &mut W,
    value: &T,
    output: &Output,
) -> Result<(), CliError> {
    let encoding = |error: serde_json::Error| CliError::Encode {
        format: "JSON",
        detail: error.to_string(),
    };
    match output.format {
        OutputFormat::JsonPath => {
            let document = serde_json::to_value(value).map_err(encoding)?;
            let text = output
                .jsonpath
                .as_ref()
                .map(|template| template.render(&document))
                .unwrap_or_default();
            out.write_all(text.as_bytes()).map_err(CliError::Output)
        }
        OutputFormat::Name => Err(CliError::Usage(
            "-o name lists resources of the cluster; this report has none: use -o json or -o yaml"
                .to_owned(),
        )),
        OutputFormat::Yaml => {
            serde_saphyr::to_io_writer(out, value).map_err(|error| CliError::Encode {
                format: "YAML",
                detail: error.to_string(),
            })
        }
        _ => {
            serde_json::to_writer_pretty(&mut *out, value).map_err(|error| {
                if error.is_io() {
                    CliError::Output(error.into())
                } else {
                    encoding(error)
                }
            })?;
            out.write_all(b"\n").map_err(CliError::Output)
        }
    }
}

/// Writes to standard output and flushes; a closed pipe comes back as a broken-pipe error that
/// `main` turns into a clean exit.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .map_err(CliError::Output)?;
    stdout.flush().map_err(CliError::Output)
}

/// Progress and prompts go to standard error, so that standard output stays parseable.
pub fn progress(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Shortens a message for a table cell, on a character boundary.
pub fn shorten(text: &str, max_chars: usize) -> String {
    let single_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if single_line.chars().count() <= max_chars {
        return single_line;
    }
    let mut short: String = single_line
        .chars()
        .take(max_chars.saturating_sub(1))
        .collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_painter_adds_no_escape_codes() {
        assert_eq!(Painter::PLAIN.paint("Error", Tone::Bad), "Error");
        let coloured = Painter { color: true }.paint("Error", Tone::Bad);
        assert!(coloured.contains('\u{1b}'));
    }

    #[test]
    fn shorten_keeps_short_text_and_cuts_long_text() {
        assert_eq!(shorten("a  b\nc", 10), "a b c");
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
    }

    #[test]
    fn a_table_has_aligned_columns_and_no_trailing_blanks_in_colour_too() {
        let rows = [("shop", Some(Tone::Good)), ("a-longer-name", None)];
        let table = |painter: Painter, header: bool| {
            let mut out = Vec::new();
            write_table(
                &mut out,
                header.then_some(&["NAME", "PHASE"][..]),
                &rows,
                |(name, tone)| {
                    vec![
                        ((*name).to_owned(), None),
                        (
                            if tone.is_some() {
                                "Registered"
                            } else {
                                "Error"
                            }
                            .to_owned(),
                            *tone,
                        ),
                    ]
                },
                painter,
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            table(Painter::PLAIN, true),
            "NAME           PHASE\nshop           Registered\na-longer-name  Error\n"
        );
        assert_eq!(
            table(Painter::PLAIN, false),
            "shop           Registered\na-longer-name  Error\n"
        );
        // Escape codes take no room in the layout.
        let coloured = table(Painter { color: true }, true);
        assert!(coloured.contains('\u{1b}'));
        let stripped: String = coloured
            .split('\u{1b}')
            .enumerate()
            .map(|(index, part)| {
                if index == 0 {
                    part
                } else {
                    part.split_once('m').map_or(part, |(_, rest)| rest)
                }
            })
            .collect();
        assert_eq!(stripped, table(Painter::PLAIN, true));
    }
}
