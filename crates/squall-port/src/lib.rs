//! squall-port (work in progress)
