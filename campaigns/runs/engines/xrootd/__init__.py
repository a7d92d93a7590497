"""The xrootd engine: copies made by XRootD's own client library (XrdCl's CopyProcess, what
`xrdcp` runs) in the driving worker's copy threads, third-party or streamed through this
process. Its app (`apps.XrootdConfig`) registers it when ready;
docs/xrootd-engine.md."""
