//! squall-tcp (work in progress)
