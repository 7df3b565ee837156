// Package doclinks holds only a test: every relative link in README.md and
// docs/*.md names a file of the repository that exists and, when it has a
// #fragment into a Markdown file, a heading of that file, as GitHub derives
// heading anchors. A renamed heading or a moved file fails it.
package doclinks
