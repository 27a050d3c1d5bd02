package notify

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
)

// SMTP sends e-mail through an SMTP server the operator configured (the
// embedded default's -smtp): STARTTLS whenever the server offers it, PLAIN
// authentication when a user is given (net/smtp refuses it over a
// connection that is neither TLS nor to localhost).
type SMTP struct {
	Addr     string // host:port
	User     string
	Password string
	From     string
	// TLSConfig for STARTTLS (default: verify the server's name).
	TLSConfig *tls.Config
}

// ParseSMTP reads -smtp (smtp://user@host:port; port 587 by default) with
// the password given apart (SMTP_PASSWORD) and the sender address from.
func ParseSMTP(raw, password, from string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
		return nil, fmt.Errorf("-smtp must be smtp://[user@]host[:port]")
	}
	if _, set := u.User.Password(); set {
		return nil, errors.New("-smtp must not hold the password (set SMTP_PASSWORD, which ps does not show)")
	}
	port := u.Port()
	if port == "" {
		port = "587"
	}
	if from == "" {
		return nil, errors.New("-smtp-from is required with -smtp")
	}
	if a, err := mail.ParseAddress(from); err != nil || strings.ContainsAny(from, "\r\n") {
		return nil, fmt.Errorf("-smtp-from is not an e-mail address")
	} else {
		from = a.Address
	}
	return &SMTP{Addr: net.JoinHostPort(u.Hostname(), port), User: u.User.Username(), Password: password, From: from}, nil
}

// SendMail implements MailSender.
func (m *SMTP) SendMail(ctx context.Context, to []string, msg alert.Mail) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("could not reach the SMTP server: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(m.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := m.TLSConfig
		if cfg == nil {
			cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if m.User != "" {
		if err := c.Auth(smtp.PlainAuth("", m.User, m.Password, host)); err != nil {
			return fmt.Errorf("SMTP authentication: %w", err)
		}
	}
	if err := c.Mail(m.From); err != nil {
		return err
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(compose(m.From, to, msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// compose renders an RFC 5322 message: UTF-8 text, the subject encoded as
// RFC 2047 when it needs to be, CRLF line ends (the DATA writer of
// net/smtp dot-stuffs).
func compose(from string, to []string, msg alert.Mail) []byte {
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	domain := from[strings.LastIndex(from, "@")+1:]
	var b strings.Builder
	b.WriteString("From: " + from + "\r\n")
	b.WriteString("To: " + strings.Join(to, ", ") + "\r\n")
	b.WriteString("Subject: " + mime.QEncoding.Encode("utf-8", msg.Subject) + "\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n")
	b.WriteString("Message-ID: <" + hex.EncodeToString(id) + "@" + domain + ">\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	// Every line end becomes CRLF, a lone CR or LF included, so no text
	// (an expectation's words are a tenant's) can end the DATA early or
	// smuggle a command: <CR>.<CR><LF> and bare CRs never reach the wire.
	text := strings.ReplaceAll(strings.ReplaceAll(msg.Text, "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(line + "\r\n")
	}
	return []byte(b.String())
}
