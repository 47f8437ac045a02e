"""`envcheck explain BUNDLE`: diagnose a bundle captured on another machine (`envcheck facts --bundle`)."""
