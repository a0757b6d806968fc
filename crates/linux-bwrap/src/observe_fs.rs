//! The observer filesystem (`--itemize observe`): a FUSE filesystem served by the runner in
//! place of each directory deny anchor, recording every attempt to find, list or change
//! what the anchor hides.
