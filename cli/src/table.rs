//! Plain-text tables in kubectl's style: upper-case headers, columns padded to their widest
//! cell and three spaces apart, no trailing spaces. Cells are shown on one line with control
//! characters escaped ([`printable_line`]): they often hold what users wrote.

use crate::terminal_text::printable_line;

/// A table: headers and rows of cells, rendered with [`Table::render`].
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<I, S>(headers: I) -> Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty and extra cells are dropped.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row (and the header), each ending in a newline.
    pub fn render(&self) -> String {
        // One line per row, whatever a cell holds, and nothing a terminal would act on.
        let lines: Vec<Vec<String>> = std::iter::once(&self.headers)
            .chain(&self.rows)
            .map(|line| {
                line.iter()
                    .map(|cell| printable_line(cell).into_owned())
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|column| {
                lines
                    .iter()
                    .map(|line| line[column].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for line in &lines {
            let mut text = String::new();
            for (column, cell) in line.iter().enumerate() {
                text.push_str(cell);
                if column + 1 < line.len() {
                    let pad = widths[column] - cell.chars().count() + 3;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_on_the_widest_cell() {
        let mut table = Table::new(["NAME", "PHASE", "EXPIRES"]);
        table.row(["alice-x7k2p", "Ready", "in 29m 58s"]);
        table.row(["al-1", "Pending", ""]);
        assert_eq!(
            table.render(),
            "NAME          PHASE     EXPIRES\n\
             alice-x7k2p   Ready     in 29m 58s\n\
             al-1          Pending\n"
        );
    }

    #[test]
    fn short_rows_are_padded_and_long_ones_cut() {
        let mut table = Table::new(["A", "B"]);
        table.row(["1"]);
        table.row(["1", "2", "3"]);
        assert_eq!(table.render(), "A   B\n1\n1   2\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut table = Table::new(["USER", "X"]);
        table.row(["jürgen", "1"]);
        assert_eq!(table.render(), "USER     X\njürgen   1\n");
    }

    #[test]
    fn escape_sequences_in_cells_are_shown_not_run() {
        let mut table = Table::new(["REASON", "TICKET"]);
        table.row(["ok\u{1b}[2J", "INC-1\u{9b}31m"]);
        assert_eq!(
            table.render(),
            "REASON        TICKET\nok\\u{1b}[2J   INC-1\\u{9b}31m\n"
        );
    }

    #[test]
    fn cells_never_break_a_line() {
        let mut table = Table::new(["A", "B"]);
        table.row(["x\ny", "z"]);
        assert_eq!(table.render(), "A     B\nx y   z\n");
        assert!(Table::new(["A"]).is_empty());
    }
}
