//! squall-astf (work in progress)
