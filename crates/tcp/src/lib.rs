//! Sans-IO TCP model (New Reno, SACK, RACK-TLP) with the TCP thin-stream mechanisms.
