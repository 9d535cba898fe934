//! Output: the format the user chose, colours only where they belong, tables, and writing to
//! standard output so that a closed pipe ends the program quietly.

use std::io::{IsTerminal, Write};

use comfy_table::{Cell, Color, Table, presets};
use owo_colors::OwoColorize;
use serde::Serialize;

use crate::cli::{ColorChoice, OutputFormat};
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

    /// A table cell in a tone (comfy-table measures its own colours correctly).
    pub fn cell(&self, text: impl Into<String>, tone: Option<Tone>) -> Cell {
        let cell = Cell::new(text.into());
        match (self.color, tone) {
            (true, Some(Tone::Good)) => cell.fg(Color::Green),
            (true, Some(Tone::Warn)) => cell.fg(Color::Yellow),
            (true, Some(Tone::Bad)) => cell.fg(Color::Red),
            (true, Some(Tone::Dim)) => cell.fg(Color::DarkGrey),
            _ => cell,
        }
    }

    /// A kubectl-looking table: no borders, a header row, columns two spaces apart.
    pub fn table(&self, header: &[&str]) -> Table {
        let mut table = Table::new();
        table.load_style(presets::NOTHING);
        table.set_content_arrangement(comfy_table::ContentArrangement::Disabled);
        if self.color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        table.set_header(header.iter().map(|title| Cell::new(*title)));
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        table
    }
}

/// A table as text, each line without trailing blanks.
pub fn table_text(table: &Table) -> String {
    let mut text = String::new();
    for line in table.lines() {
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// `kind.nauthera.io/name`, as `kubectl get -o name` writes a resource.
pub fn resource_name(kind: crate::kinds::Kind, name: &str) -> String {
    format!("{}.nauthera.io/{name}\n", kind.singular())
}

/// The report as JSON or YAML, as text.
pub fn encode<T: Serialize>(value: &T, format: OutputFormat) -> Result<String, CliError> {
    let mut out = Vec::new();
    write_encoded(&mut out, value, format)?;
    String::from_utf8(out).map_err(|error| CliError::Encode {
        format: "JSON",
        detail: error.to_string(),
    })
}

/// Writes the report as JSON or YAML to standard output as it is encoded, never holding the
/// whole text: a report of a hundred thousand resources is as large as its objects.
pub fn emit<T: Serialize>(value: &T, format: OutputFormat) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write_encoded(&mut out, value, format)?;
    out.flush().map_err(CliError::Output)
}

fn write_encoded<W: Write, T: Serialize>(
    out: &mut W,
    value: &T,
    format: OutputFormat,
) -> Result<(), CliError> {
    match format {
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
                    CliError::Encode {
                        format: "JSON",
                        detail: error.to_string(),
                    }
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
    fn a_plain_table_has_aligned_columns_and_no_trailing_blanks() {
        let painter = Painter::PLAIN;
        let mut table = painter.table(&["NAME", "PHASE"]);
        table.add_row(vec![
            painter.cell("shop", None),
            painter.cell("Registered", Some(Tone::Good)),
        ]);
        table.add_row(vec![
            painter.cell("a-longer-name", None),
            painter.cell("Error", None),
        ]);
        assert_eq!(
            table_text(&table),
            "NAME           PHASE\nshop           Registered\na-longer-name  Error\n"
        );
    }
}
