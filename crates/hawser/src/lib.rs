//! hawser
