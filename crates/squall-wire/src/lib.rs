//! squall-wire (work in progress)
