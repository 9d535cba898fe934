//! A faithful fake of nauthera-server (being written).
