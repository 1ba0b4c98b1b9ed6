//! Closed-form models: the head-of-line blocking model.
