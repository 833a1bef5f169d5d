//! squall-engine (work in progress)
